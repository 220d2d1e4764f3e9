/**
 * The hosted pages' stylesheet, served as `/assets/pages.css` (the CSP allows styles from 'self' only).
 * Calm and legible: system font, one accent colour, cards, generous spacing; every colour pair meets
 * WCAG AA (text #1f2328 / muted #4b5563 on white ≥ 7:1; white on accent #1d4ed8 6.7:1); focus is a
 * visible 3px ring on every control.
 */
export const PAGES_CSS = `
*,*::before,*::after{box-sizing:border-box}
:root{--bg:#f4f6f8;--card:#fff;--text:#1f2328;--muted:#4b5563;--line:#d9dee4;--accent:#1d4ed8;--accent-dark:#1e40af;
--danger:#b42318;--ok-bg:#ecfdf3;--ok-line:#abefc6;--ok-text:#05603a;--err-bg:#fef3f2;--err-line:#fecdca;--err-text:#912018;
--info-bg:#eff6ff;--info-line:#bfdbfe;--info-text:#1e3a8a;--radius:12px}
html{font-size:16px}
body{margin:0;background:var(--bg);color:var(--text);font:1rem/1.55 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;-webkit-font-smoothing:antialiased;overflow-wrap:anywhere}
a{color:var(--accent)}
a:hover{color:var(--accent-dark)}
.skip{position:absolute;left:-999px;top:0;background:#fff;padding:.5rem 1rem}
.skip:focus{left:1rem;top:1rem;z-index:10}
header.top{background:#fff;border-bottom:1px solid var(--line)}
header.top .in{max-width:46rem;margin:0 auto;padding:.85rem 1.25rem;display:flex;align-items:center;justify-content:space-between;gap:1rem;flex-wrap:wrap}
.brand{font-weight:650;color:var(--text);text-decoration:none;display:flex;align-items:center;gap:.5rem;letter-spacing:-.01em}
.brand .mark{display:inline-grid;place-items:center;width:1.75rem;height:1.75rem;border-radius:8px;background:var(--accent);color:#fff;font-size:.9rem;font-weight:700}
.who{display:flex;align-items:center;gap:.75rem;color:var(--muted);font-size:.925rem}
.who form{margin:0;flex:none}
.who{min-width:0}
button,a.button,.brand,dt,.input-unit .unit{overflow-wrap:normal}
dl.receipt-meta dt,.input-unit .unit{flex:none}
main{max-width:46rem;margin:0 auto;padding:2rem 1.25rem 3rem}
main.narrow{max-width:30rem}
h1{font-size:1.6rem;line-height:1.25;margin:0 0 1rem;letter-spacing:-.015em}
h2{font-size:1.1rem;margin:0 0 .75rem}
p{margin:0 0 1rem}
.lead{color:var(--muted);margin:-.5rem 0 1.5rem}
.card{background:var(--card);border:1px solid var(--line);border-radius:var(--radius);padding:1.5rem;margin:0 0 1.25rem;box-shadow:0 1px 2px rgba(16,24,40,.05)}
.card > :last-child{margin-bottom:0}
.balance{font-size:2.25rem;font-weight:650;letter-spacing:-.02em;line-height:1.1;margin:.25rem 0 .25rem}
.balance small{font-size:1rem;font-weight:500;color:var(--muted);margin-left:.35rem}
.muted{color:var(--muted)}
.topup-inline{border-top:1px solid #eef0f3;margin-top:1.25rem;padding-top:1.25rem}
.topup-inline > p{margin:0}
.topup-inline > p + form.pay{margin-top:.75rem}
ul.topup-options{list-style:none;padding:0;margin:0 0 1rem}
ul.topup-options li{display:flex;align-items:center;gap:1rem;padding:.6rem 0;border-top:1px solid #eef0f3}
ul.topup-options li:first-child{border-top:none}
ul.topup-options form{margin:0;flex:none}
ul.topup-options button{width:9.5rem;flex:none}
fieldset.autotopup{border:1px solid #dfe3e8;border-radius:10px;padding:.75rem 1rem 0;margin:0 0 1rem}
fieldset.autotopup legend{font-weight:600;padding:0 .35rem}
fieldset.autotopup .inline{margin:.75rem 0 .5rem}
label.check{display:flex;align-items:center;gap:.5rem;font-weight:600}
label.check input{width:1.2rem;height:1.2rem;margin:0}
select{font:inherit;color:var(--text);background:#fff;border:1px solid #8b95a1;border-radius:8px;padding:.55rem .6rem;min-height:2.75rem;width:100%}
form.autotopup-off{margin-top:.5rem}
.inline.pay-buttons > button{margin-top:0}
form.pay + form{margin-top:1.25rem}
.field{margin:0 0 1rem}
label{display:block;font-weight:600;margin:0 0 .35rem}
.hint{display:block;color:var(--muted);font-size:.9rem;margin-top:.3rem}
input[type=email],input[type=text],input[type=number]{width:100%;font:inherit;color:var(--text);background:#fff;border:1px solid #8b95a1;border-radius:8px;padding:.6rem .75rem;min-height:2.75rem}
input.code{font-size:1.4rem;letter-spacing:.35em;font-variant-numeric:tabular-nums;max-width:12rem}
input:focus-visible,button:focus-visible,a:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
input:focus-visible{border-color:var(--accent)}
input[aria-invalid=true]{border-color:var(--danger)}
button{font:inherit;font-weight:600;border-radius:8px;padding:.6rem 1.1rem;min-height:2.75rem;cursor:pointer;border:1px solid var(--accent);background:var(--accent);color:#fff}
button:hover{background:var(--accent-dark);border-color:var(--accent-dark)}
button.secondary{background:#fff;color:var(--text);border-color:#8b95a1}
button.secondary:hover{background:#f3f4f6}
button.danger{background:#fff;color:var(--danger);border-color:#e4a29b}
button.danger:hover{background:var(--err-bg)}
button.danger-solid{background:var(--danger);border-color:var(--danger);color:#fff}
button.danger-solid:hover{background:#912018;border-color:#912018}
a.button{display:inline-flex;align-items:center;font-weight:600;border-radius:8px;padding:.6rem 1.1rem;min-height:2.75rem;text-decoration:none;border:1px solid #8b95a1;background:#fff;color:var(--text)}
a.button:hover{background:#f3f4f6;color:var(--text)}
button.link{background:none;border:none;color:var(--accent);padding:.25rem .4rem;min-height:0;text-decoration:underline;font-weight:500}
.actions{display:flex;gap:.75rem;flex-wrap:wrap;align-items:center;margin-top:1.25rem}
.actions form{margin:0}
.inline{display:flex;gap:.75rem;align-items:flex-start;flex-wrap:wrap}
.inline > button{margin-top:1.9rem}
.inline .field{flex:1 1 12rem;margin:0}
.alert{border:1px solid;border-radius:10px;padding:.75rem 1rem;margin:0 0 1.25rem}
.alert.error{background:var(--err-bg);border-color:var(--err-line);color:var(--err-text)}
.alert.ok{background:var(--ok-bg);border-color:var(--ok-line);color:var(--ok-text)}
.alert.info{background:var(--info-bg);border-color:var(--info-line);color:var(--info-text)}
ul.perms{list-style:none;padding:0;margin:0 0 1rem}
ul.perms li{padding:.5rem 0 .5rem 1.75rem;position:relative;border-top:1px solid #eef0f3}
ul.perms li:first-child{border-top:none}
ul.perms li::before{content:"";position:absolute;left:.25rem;top:.95rem;width:.6rem;height:.6rem;border-radius:50%;background:var(--accent)}
ul.perms.never li::before{content:"\\00d7";background:none;width:auto;height:auto;border-radius:0;top:.35rem;left:.3rem;color:var(--danger);font-weight:700;font-size:1.1rem;line-height:1.4}
h3.perms-head{font-size:.95rem;margin:.25rem 0 .25rem;color:var(--text)}
.app-name{font-weight:650}
.desc{background:#f8fafc;border:1px solid #eef0f3;border-radius:8px;padding:.75rem 1rem;color:var(--text)}
ul.apps{list-style:none;padding:0;margin:0}
ul.apps li{display:flex;justify-content:space-between;align-items:center;gap:1rem;padding:.75rem 0;border-top:1px solid #eef0f3}
ul.apps li:first-child{border-top:none;padding-top:0}
ul.apps form{margin:0}
table{width:100%;border-collapse:collapse;font-size:.95rem}
th,td{text-align:left;padding:.55rem .5rem;border-top:1px solid #eef0f3;vertical-align:top}
th{font-weight:600;color:var(--muted);border-top:none;font-size:.85rem;text-transform:uppercase;letter-spacing:.03em}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.in-amt{color:var(--ok-text)}
.table-wrap{overflow-x:auto}
table.activity > tbody > tr.has-receipt > td{padding-bottom:.2rem}
table.activity > tbody > tr.receipt-row > td{border-top:none;padding-top:0;padding-bottom:.6rem}
.sr-only{position:absolute;width:1px;height:1px;padding:0;margin:-1px;overflow:hidden;clip:rect(0,0,0,0);white-space:nowrap;border:0}
details.receipt > summary{display:block;width:fit-content;cursor:pointer;list-style:none;color:var(--accent);font-size:.875rem;font-weight:500;border-radius:6px;padding:.1rem .25rem;margin-left:-.25rem}
details.receipt > summary::-webkit-details-marker{display:none}
details.receipt > summary::before{content:"";display:inline-block;vertical-align:.12em;margin:0 .5rem 0 .1rem;width:.4rem;height:.4rem;border-right:2px solid currentColor;border-bottom:2px solid currentColor;transform:rotate(-45deg);transition:transform .15s}
details.receipt[open] > summary::before{transform:rotate(45deg)}
details.receipt > summary:hover{color:var(--accent-dark);text-decoration:underline}
details.receipt > summary:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
.receipt-sum{color:var(--muted);font-weight:400}
.receipt-body{margin-top:.5rem;background:#f8fafc;border:1px solid #e5e9ef;border-radius:10px;padding:.85rem 1rem .75rem}
dl.receipt-meta{display:flex;flex-wrap:wrap;gap:.35rem 2rem;margin:0 0 .5rem;font-size:.875rem}
dl.receipt-meta > div{display:flex;gap:.5rem;min-width:0}
dl.receipt-meta dt{color:var(--muted)}
dl.receipt-meta dd{margin:0;font-weight:600;overflow-wrap:anywhere}
dl.receipt-meta code{font:500 .8rem/1.5 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;color:var(--muted)}
table.receipt-lines{font-size:.875rem;font-variant-numeric:tabular-nums}
table.receipt-lines th,table.receipt-lines td{padding:.4rem .5rem;border-top-color:#e5e9ef}
table.receipt-lines th:first-child,table.receipt-lines td:first-child{padding-left:0}
table.receipt-lines th:last-child,table.receipt-lines td:last-child{padding-right:0}
table.receipt-lines thead th{font-size:.75rem}
table.receipt-lines tbody th,table.receipt-lines tfoot th{text-transform:none;letter-spacing:0;font-size:inherit;color:var(--text);font-weight:500;border-top:1px solid #e5e9ef}
.r-unit-exact{display:block}
.r-per-m{display:block;color:var(--muted);font-size:.78rem}
table.receipt-lines tfoot th,table.receipt-lines tfoot td{border-top:1px solid #e5e9ef}
table.receipt-lines tfoot tr.r-total > *{border-top:2px solid #cfd6de;font-weight:700;font-size:.95rem;padding-top:.55rem}
table.receipt-lines tfoot tr.r-paid > *{color:var(--muted);font-weight:500}
table.receipt-lines tfoot tr.r-covered > *{color:var(--muted);font-weight:500}
table.receipt-lines tfoot tr.r-owed > *{color:var(--err-text);font-weight:600}
table.receipt-lines tfoot tr.r-refund > *{color:var(--ok-text);font-weight:500}
table.receipt-lines tfoot tr.r-net > *{border-top:2px solid #cfd6de;font-weight:700}
.refund-detail{color:var(--muted);font-size:.875rem}
.refund-detail .refund-ref{display:block}
.refund-detail code{font:500 .8rem/1.5 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.receipt-note{margin:.6rem 0 0;color:var(--muted);font-size:.8rem;line-height:1.45}
header.top .in.narrow{max-width:30rem}
.m-label{display:none}
table.keys td.act form{margin:0}
@media (max-width:600px){
table.keys > thead{display:none}
table.keys > tbody > tr{display:grid;grid-template-columns:1fr auto;grid-template-areas:"name act" "app act" "k act" "u act";column-gap:.75rem;align-items:center;border-top:1px solid #eef0f3;padding:.6rem 0}
table.keys > tbody > tr:first-child{border-top:none}
table.keys > tbody > tr > td{border:none;padding:0}
table.keys td.name{grid-area:name;font-weight:600;overflow-wrap:anywhere}
table.keys td.app{grid-area:app;color:var(--muted);font-size:.85rem}
table.keys td.last4{grid-area:k;color:var(--muted);font-size:.85rem}
table.keys td.used{grid-area:u;color:var(--muted);font-size:.85rem}
table.keys td.act{grid-area:act}
.m-label{display:inline}
table.activity > thead{display:none}
table.activity > tbody > tr{display:grid;grid-template-columns:1fr auto;grid-template-areas:"item amt" "app date";column-gap:.75rem;border-top:1px solid #eef0f3;padding:.5rem 0}
table.activity > tbody > tr:first-child{border-top:none}
table.activity > tbody > tr > td{border:none;padding:.1rem 0}
table.activity > tbody > tr > td.item{grid-area:item;overflow-wrap:anywhere}
table.activity > tbody > tr > td.num{grid-area:amt}
table.activity > tbody > tr > td.app{grid-area:app;color:var(--muted);font-size:.85rem}
table.activity > tbody > tr > td.date{grid-area:date;color:var(--muted);font-size:.85rem;text-align:right}
table.activity > tbody > tr.receipt-row{display:block;border-top:none;padding:0 0 .6rem}
table.activity > tbody > tr.receipt-row > td{display:block;padding:0}
.receipt-body{padding:.75rem .8rem .65rem}
table.receipt-lines thead{display:none}
table.receipt-lines tbody tr{display:grid;grid-template-columns:auto 1fr auto;grid-template-areas:"label label amt" "tok unit unit";column-gap:.3rem;border-top:1px solid #e5e9ef;padding:.45rem 0}
table.receipt-lines tbody tr:first-child{border-top:none}
table.receipt-lines tbody th,table.receipt-lines tbody td{border:none;padding:0}
table.receipt-lines tbody .r-label{grid-area:label}
table.receipt-lines tbody .r-amt{grid-area:amt;font-weight:600}
table.receipt-lines tbody .r-tokens{grid-area:tok;color:var(--muted);font-size:.8rem;text-align:left}
table.receipt-lines tbody .r-tokens:not(.r-none)::after{content:" tokens \\00d7"}
table.receipt-lines tbody .r-unit{grid-area:unit;color:var(--muted);font-size:.8rem;text-align:left;white-space:normal}
table.receipt-lines tbody .r-none{display:none}
.r-unit-exact,.r-per-m{display:inline}
.r-unit-exact,.r-per-m{white-space:nowrap}
.r-per-m{font-size:inherit;margin-left:.3rem}
.r-per-m::before{content:"("}
.r-per-m::after{content:")"}
table.receipt-lines tfoot tr{display:flex;justify-content:space-between;align-items:baseline;gap:.75rem;border-top:1px solid #e5e9ef}
table.receipt-lines tfoot tr.r-total{border-top:2px solid #cfd6de}
table.receipt-lines tfoot tr > *,table.receipt-lines tfoot tr.r-total > *{border-top:none;padding-left:0;padding-right:0}
}
select{font:inherit;color:var(--text);background:#fff;border:1px solid #8b95a1;border-radius:8px;padding:.55rem .75rem;min-height:2.75rem;width:100%}
select:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
.allowance-fields{display:flex;gap:.75rem;flex-wrap:wrap}
.consent-forms{display:flex;flex-wrap:wrap;gap:.75rem;align-items:center}
.consent-forms > form{margin:0}
.consent-forms > form.contents{display:contents}
.consent-forms .allowance-fields{flex:1 1 100%;margin-bottom:.5rem}
.allowance-fields .field{flex:1 1 10rem;margin:0}
.input-unit{display:flex;align-items:center;gap:.4rem}
.input-unit .unit{color:var(--muted);font-size:.9rem}
.allowance-form{display:flex;gap:.75rem;align-items:flex-end;flex-wrap:wrap;margin:.75rem 0 0}
ul.apps form.allowance-form{margin-top:1rem;padding-top:1rem;border-top:1px solid #eef0f3}
.allowance-form .allowance-fields{flex:1 1 20rem}
ul.apps li.app{display:block}
ul.apps .app-head{display:flex;justify-content:space-between;align-items:center;gap:1rem}
.allowance-summary .reached{color:var(--danger);font-weight:600}
footer.foot.narrow{max-width:30rem}
footer.foot{max-width:46rem;margin:0 auto;padding:0 1.25rem 2rem;color:var(--muted);font-size:.85rem}
@media (max-width:600px){
ul.apps .app-head{flex-direction:column;align-items:flex-start;gap:.6rem}
ul.topup-options li{flex-direction:column;align-items:flex-start;gap:.4rem}
}
`;
