import { Migration } from '@mikro-orm/migrations';

/**
 * Accounts and transfers (DESIGN): the double-entry ledger, the shared wallet's tables, withdrawals and
 * paywall descriptions. Generated DDL, then a hand-written move of today's end-user balances, holds and
 * ledger history into accounts and transfers (not a raw unit lost: the migration test compares), then
 * the old columns and table go. `down` moves DEFAULT balances and history back.
 */
export class Migration20261123204134_accounts extends Migration {
  override name = 'Migration20261123204134_accounts';

  override up(): void | Promise<void> {
    this.addSql(
      `create table "ledger_account" ("id" uuid not null, "kind" varchar(16) not null, "paywall_id" uuid null, "balance_raw" bigint not null default 0, "held_raw" bigint not null default 0, "created_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(
      `create table "connect_request" ("id" uuid not null, "paywall_id" uuid not null, "end_user_id" uuid not null, "status" varchar(16) not null default 'pending', "wallet_user_id" uuid null, "expires_at" timestamptz not null, "created_at" timestamptz not null default now(), "decided_at" timestamptz null, primary key ("id"));`,
    );
    this.addSql(
      `create index "connect_request_end_user_id_created_at_index" on "connect_request" ("end_user_id", "created_at");`,
    );
    this.addSql(
      `create table "transfer" ("seq" bigserial primary key, "id" uuid not null, "kind" varchar(24) not null, "debit_account_id" uuid not null, "credit_account_id" uuid not null, "amount_raw" bigint not null, "balance_after_raw" bigint null, "paywall_id" uuid null, "end_user_id" uuid null, "charge_id" uuid null, "withdrawal_id" uuid null, "metadata" jsonb not null default '{}', "created_at" timestamptz not null default now());`,
    );
    this.addSql(`alter table "transfer" add constraint "transfer_id_unique" unique ("id");`);
    this.addSql(
      `create index "transfer_debit_account_id_seq_index" on "transfer" ("debit_account_id", "seq");`,
    );
    this.addSql(
      `create index "transfer_credit_account_id_seq_index" on "transfer" ("credit_account_id", "seq");`,
    );
    this.addSql(`create index "transfer_end_user_id_seq_index" on "transfer" ("end_user_id", "seq");`);
    this.addSql(`create index "transfer_paywall_id_kind_index" on "transfer" ("paywall_id", "kind");`);
    this.addSql(
      `create table "wallet_sign_in" ("id" uuid not null, "email" varchar(254) not null, "code_hash" varchar(64) not null, "ip" varchar(64) not null, "attempts" int not null default 0, "expires_at" timestamptz not null, "used_at" timestamptz null, "created_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(
      `create index "wallet_sign_in_email_created_at_index" on "wallet_sign_in" ("email", "created_at");`,
    );
    this.addSql(
      `create index "wallet_sign_in_ip_created_at_index" on "wallet_sign_in" ("ip", "created_at");`,
    );
    this.addSql(
      `create table "wallet_user" ("id" uuid not null, "email" varchar(254) not null, "account_id" uuid not null, "created_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(`alter table "wallet_user" add constraint "wallet_user_email_unique" unique ("email");`);
    this.addSql(
      `alter table "wallet_user" add constraint "wallet_user_account_id_unique" unique ("account_id");`,
    );
    this.addSql(
      `create table "wallet_session" ("id" uuid not null, "token_hash" varchar(64) not null, "wallet_user_id" uuid not null, "expires_at" timestamptz not null, "created_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(
      `alter table "wallet_session" add constraint "wallet_session_token_hash_unique" unique ("token_hash");`,
    );
    this.addSql(`create index "wallet_session_wallet_user_id_index" on "wallet_session" ("wallet_user_id");`);
    this.addSql(
      `create table "wallet_connection" ("id" uuid not null, "paywall_id" uuid not null, "end_user_id" uuid not null, "wallet_user_id" uuid not null, "created_at" timestamptz not null default now(), "revoked_at" timestamptz null, primary key ("id"));`,
    );
    this.addSql(
      `create index "wallet_connection_paywall_id_created_at_index" on "wallet_connection" ("paywall_id", "created_at");`,
    );
    this.addSql(
      `create index "wallet_connection_wallet_user_id_created_at_index" on "wallet_connection" ("wallet_user_id", "created_at");`,
    );
    this.addSql(
      `create table "withdrawal" ("id" uuid not null, "paywall_id" uuid not null, "amount_raw" bigint not null, "destination" varchar(500) not null, "status" varchar(16) not null, "failure_reason" text null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(
      `create index "withdrawal_paywall_id_created_at_index" on "withdrawal" ("paywall_id", "created_at");`,
    );
    this.addSql(
      `create index "withdrawal_status_created_at_index" on "withdrawal" ("status", "created_at");`,
    );
    this.addSql(`alter table "paywall" add "description" text null;`);
    this.addSql(`alter table "end_user" add "account_id" uuid null;`);
    this.addSql(
      `alter table "end_user" add constraint "end_user_account_id_foreign" foreign key ("account_id") references "ledger_account" ("id") on delete set null;`,
    );
    this.addSql(`alter table "charge" add "account_id" uuid null;`);
    this.addSql(
      `alter table "charge" add constraint "charge_account_id_foreign" foreign key ("account_id") references "ledger_account" ("id") on delete set null;`,
    );
    this.addSql(
      `alter table "ledger_account" add constraint "ledger_account_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id") on delete set null;`,
    );
    this.addSql(
      `alter table "ledger_account" add constraint "ledger_account_balance_nonnegative" check (kind = 'world' or balance_raw >= 0);`,
    );
    this.addSql(
      `alter table "ledger_account" add constraint "ledger_account_held_within_balance" check (kind = 'world' or held_raw <= balance_raw);`,
    );
    this.addSql(
      `alter table "ledger_account" add constraint "ledger_account_held_raw_check" check (held_raw >= 0);`,
    );
    this.addSql(
      `alter table "connect_request" add constraint "connect_request_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id");`,
    );
    this.addSql(
      `alter table "connect_request" add constraint "connect_request_end_user_id_foreign" foreign key ("end_user_id") references "end_user" ("id");`,
    );
    this.addSql(
      `alter table "transfer" add constraint "transfer_debit_account_id_foreign" foreign key ("debit_account_id") references "ledger_account" ("id");`,
    );
    this.addSql(
      `alter table "transfer" add constraint "transfer_credit_account_id_foreign" foreign key ("credit_account_id") references "ledger_account" ("id");`,
    );
    this.addSql(
      `alter table "transfer" add constraint "transfer_distinct_accounts" check (debit_account_id <> credit_account_id);`,
    );
    this.addSql(`alter table "transfer" add constraint "transfer_amount_raw_check" check (amount_raw > 0);`);
    this.addSql(
      `alter table "wallet_user" add constraint "wallet_user_account_id_foreign" foreign key ("account_id") references "ledger_account" ("id");`,
    );
    this.addSql(
      `alter table "wallet_session" add constraint "wallet_session_wallet_user_id_foreign" foreign key ("wallet_user_id") references "wallet_user" ("id");`,
    );
    this.addSql(
      `alter table "wallet_connection" add constraint "wallet_connection_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id");`,
    );
    this.addSql(
      `alter table "wallet_connection" add constraint "wallet_connection_end_user_id_foreign" foreign key ("end_user_id") references "end_user" ("id");`,
    );
    this.addSql(
      `alter table "wallet_connection" add constraint "wallet_connection_wallet_user_id_foreign" foreign key ("wallet_user_id") references "wallet_user" ("id");`,
    );
    this.addSql(
      `alter table "withdrawal" add constraint "withdrawal_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id");`,
    );
    this.addSql(
      `alter table "withdrawal" add constraint "withdrawal_amount_raw_check" check (amount_raw > 0);`,
    );

    // ---- hand-written: platform accounts, then today's balances, holds and history move in ----
    this.addSql(`insert into ledger_account (id, kind, paywall_id, balance_raw, held_raw) values
      ('00000000-0000-4000-8000-000000000000', 'world', null, 0, 0),
      ('00000000-0000-4000-8000-000000000001', 'fees', null, 0, 0),
      ('00000000-0000-4000-8000-000000000002', 'provider', null, 0, 0),
      ('00000000-0000-4000-8000-000000000003', 'payouts', null, 0, 0);`);
    this.addSql(`insert into ledger_account (id, kind, paywall_id, created_at)
      select gen_random_uuid(), 'earnings', id, created_at from paywall;`);
    // Every end user with money or history gets its own account (id = the end user's id); a SHARED
    // end user stays unconnected (it spends nothing until a wallet user approves).
    this.addSql(`insert into ledger_account (id, kind, paywall_id, balance_raw, held_raw, created_at)
      select e.id, 'user', e.paywall_id, e.balance_raw, e.held_raw, e.created_at from end_user e
       join paywall p on p.id = e.paywall_id
      where p.mode = 'DEFAULT' or e.balance_raw <> 0 or e.held_raw <> 0
         or exists (select 1 from ledger_entry l where l.user_id = e.id);`);
    this.addSql(
      `update end_user e set account_id = e.id where exists (select 1 from ledger_account a where a.id = e.id);`,
    );
    this.addSql(`update charge c set account_id = e.account_id from end_user e where e.id = c.user_id;`);
    // Each ledger entry becomes one transfer: credits come from world, debits go to the paywall's earnings.
    this
      .addSql(`insert into transfer (id, kind, debit_account_id, credit_account_id, amount_raw, balance_after_raw,
                                       paywall_id, end_user_id, charge_id, metadata, created_at)
      select l.id, l.kind,
             case when l.amount_raw > 0 then '00000000-0000-4000-8000-000000000000'::uuid else l.user_id end,
             case when l.amount_raw > 0 then l.user_id else ea.id end,
             abs(l.amount_raw), l.balance_after_raw, l.paywall_id, l.user_id, l.charge_id, l.metadata, l.created_at
        from ledger_entry l join ledger_account ea on ea.paywall_id = l.paywall_id and ea.kind = 'earnings'
       order by l.seq;`);
    this.addSql(`update ledger_account a set balance_raw = s.total
      from (select credit_account_id as id, sum(amount_raw) as total from transfer group by 1) s
     where a.id = s.id and a.kind = 'earnings';`);
    this.addSql(`update ledger_account set balance_raw = -(select coalesce(sum(amount_raw), 0) from transfer
      where debit_account_id = '00000000-0000-4000-8000-000000000000') where kind = 'world';`);
    this.addSql(`drop trigger if exists ledger_entry_append_only on ledger_entry;`);
    this.addSql(`drop function if exists ledger_entry_immutable();`);
    this.addSql(`drop table "ledger_entry" cascade;`);
    this.addSql(`alter table "end_user" drop column "balance_raw", drop column "held_raw";`);
    // Guards the entities cannot declare.
    this.addSql(
      `create unique index ledger_account_platform_kind_unique on ledger_account (kind) where paywall_id is null and kind in ('world', 'fees', 'provider', 'payouts');`,
    );
    this.addSql(
      `create unique index ledger_account_earnings_unique on ledger_account (paywall_id) where kind = 'earnings';`,
    );
    this.addSql(
      `create unique index wallet_connection_active_unique on wallet_connection (end_user_id) where revoked_at is null;`,
    );
    this.addSql(`create or replace function transfer_immutable() returns trigger language plpgsql as $$
      begin
        raise exception 'transfer is append-only';
      end $$;`);
    this.addSql(`create trigger transfer_append_only before update or delete on transfer
      for each row execute function transfer_immutable();`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop trigger if exists transfer_append_only on transfer;`);
    this.addSql(`drop function if exists transfer_immutable();`);
    this.addSql(
      `alter table "end_user" add "balance_raw" bigint not null default 0, add "held_raw" bigint not null default 0;`,
    );
    // Balances return to end users (a SHARED connection's wallet balance has nowhere to go back to: the
    // previous version has no wallets).
    this.addSql(`update end_user e set balance_raw = a.balance_raw, held_raw = a.held_raw
      from ledger_account a where a.id = e.account_id and a.kind = 'user';`);
    this.addSql(
      `create table "ledger_entry" ("seq" bigserial primary key, "id" uuid not null, "paywall_id" uuid not null, "user_id" uuid not null, "kind" varchar(16) not null, "amount_raw" bigint not null, "balance_after_raw" bigint not null, "charge_id" uuid null, "metadata" jsonb not null default '{}', "created_at" timestamptz not null default now());`,
    );
    this
      .addSql(`insert into ledger_entry (id, paywall_id, user_id, kind, amount_raw, balance_after_raw, charge_id, metadata, created_at)
      select t.id, t.paywall_id, t.end_user_id, t.kind,
             case when t.credit_account_id = e.account_id then t.amount_raw else -t.amount_raw end,
             coalesce(t.balance_after_raw, 0), t.charge_id, t.metadata, t.created_at
        from transfer t join end_user e on e.id = t.end_user_id
        join ledger_account a on a.id = e.account_id and a.kind = 'user'
       where t.kind in ('deposit', 'trial', 'charge', 'usage')
       order by t.seq;`);
    this.addSql(`alter table "ledger_entry" add constraint "ledger_entry_id_unique" unique ("id");`);
    this.addSql(`create index "ledger_entry_user_id_seq_index" on "ledger_entry" ("user_id", "seq");`);
    this.addSql(
      `alter table "ledger_entry" add constraint "ledger_entry_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id");`,
    );
    this.addSql(
      `alter table "ledger_entry" add constraint "ledger_entry_user_id_foreign" foreign key ("user_id") references "end_user" ("id");`,
    );
    this.addSql(
      `alter table "ledger_entry" add constraint "ledger_entry_amount_raw_check" check (amount_raw <> 0);`,
    );
    this.addSql(
      `alter table "ledger_entry" add constraint "ledger_entry_balance_after_raw_check" check (balance_after_raw >= 0);`,
    );
    this.addSql(`create or replace function ledger_entry_immutable() returns trigger language plpgsql as $$
      begin
        raise exception 'ledger_entry is append-only';
      end $$;`);
    this.addSql(`create trigger ledger_entry_append_only before update or delete on ledger_entry
      for each row execute function ledger_entry_immutable();`);
    this.addSql(`alter table "end_user" drop column "account_id";`);
    this.addSql(`alter table "charge" drop column "account_id";`);
    this.addSql(
      `alter table "end_user" add constraint "end_user_balance_raw_check" check (balance_raw >= 0);`,
    );
    this.addSql(`alter table "end_user" add constraint "end_user_held_raw_check" check (held_raw >= 0);`);
    this.addSql(
      `alter table "end_user" add constraint "end_user_held_within_balance" check (held_raw <= balance_raw);`,
    );
    this.addSql(`alter table "paywall" drop column "description";`);
    this.addSql(`drop table if exists "wallet_connection" cascade;`);
    this.addSql(`drop table if exists "connect_request" cascade;`);
    this.addSql(`drop table if exists "wallet_session" cascade;`);
    this.addSql(`drop table if exists "wallet_sign_in" cascade;`);
    this.addSql(`drop table if exists "wallet_user" cascade;`);
    this.addSql(`drop table if exists "withdrawal" cascade;`);
    this.addSql(`drop table if exists "transfer" cascade;`);
    this.addSql(`drop table if exists "ledger_account" cascade;`);
  }
}
