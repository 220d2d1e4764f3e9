import {
  MARKUP_DECIMALS,
  PRICE_DECIMALS,
  chatCost,
  endUserTokenPrice,
  formatUsdc,
  parseAmount,
  parseDecimal,
  usdcDecimal,
  type ModelPrice,
} from '../src/shared/money.js';

/** A price given the way an owner writes it (USDC decimal strings) → pico-USDC. */
function price(request: string, prompt: string, completion: string): ModelPrice {
  const pico = (s: string) => {
    const v = parseDecimal(s, PRICE_DECIMALS);
    if (v === null) throw new Error(`bad price ${s}`);
    return v;
  };
  return { requestPico: pico(request), promptPico: pico(prompt), completionPico: pico(completion) };
}
const markup = (s: string) => parseDecimal(s, MARKUP_DECIMALS)!;

describe('parseAmount (docs/reference.md §4 "Amounts in")', () => {
  it.each([
    ['1', 1_000_000n],
    ['1.5', 1_500_000n],
    ['0.000001', 1n],
    ['12.345678', 12_345_678n],
    ['0.10', 100_000n],
    ['1000000000', 1_000_000_000_000_000n],
    ['999999999.999999', 999_999_999_999_999n],
  ])('accepts %j as %s raw units', (input, raw) => {
    expect(parseAmount(input)).toBe(raw);
  });

  it.each([
    ['-1'],
    ['0'],
    ['0.000000'],
    ['1e3'],
    ['abc'],
    ['0.0000001'],
    ['1000000000.000001'],
    ['1000000001'],
    [''],
    [' 1'],
    ['1 '],
    ['+1'],
    ['01'],
    ['1.'],
    ['.5'],
    ['0x10'],
    ['1,5'],
    ['Infinity'],
    ['NaN'],
  ])('rejects %j', (input) => {
    expect(parseAmount(input)).toBeNull();
  });

  it.each([[1], [1.5], [0], [null], [undefined], [true], [{}], [['1']], [1n]])(
    'rejects the non-string %p (a number instead of a string is a 400 too)',
    (input) => {
      expect(parseAmount(input)).toBeNull();
    },
  );
});

describe('formatting raw units', () => {
  it.each([
    [0n, '0.000000', '0'],
    [1n, '0.000001', '0.000001'],
    [1_500_000n, '1.500000', '1.5'],
    [5_000_000n, '5.000000', '5'],
    [1_000_000_000_000_000n, '1000000000.000000', '1000000000'],
    [-2_500_000n, '-2.500000', '-2.5'],
  ])('%s raw → balanceFormatted %j, event amount %j', (raw, fixed, decimal) => {
    expect(formatUsdc(raw)).toBe(fixed);
    expect(usdcDecimal(raw)).toBe(decimal);
  });

  it('round-trips every request amount exactly (no floats)', () => {
    for (const s of ['0.000001', '0.1', '0.3', '123456789.123456', '1000000000']) {
      expect(usdcDecimal(parseAmount(s)!)).toBe(s);
    }
  });
});

describe('chatCost (docs/reference.md §5.2)', () => {
  it('request 0.001 + 1.5 x (11 x 0.000002 + 7 x 0.000005) = 0.0010855 → 1086 raw units (rounded up)', () => {
    expect(chatCost(price('0.001', '0.000002', '0.000005'), markup('1.5'), 11, 7)).toBe(1086n);
  });

  it('an exact amount is not rounded', () => {
    // 1 x (1000 x 0.000002 + 0 x …) = 0.002 → 2000 raw
    expect(chatCost(price('0', '0.000002', '0.000005'), markup('1'), 1000, 0)).toBe(2000n);
  });

  it('rounds any fraction of a raw unit up, however small', () => {
    // one prompt token at 0.0000000001 USDC is 1e-10, far below a raw unit (1e-6): still charged 1
    expect(chatCost(price('0', '0.0000000001', '0'), markup('1'), 1, 0)).toBe(1n);
    // 0.0000015 → 2, not 1
    expect(chatCost(price('0', '0.0000005', '0'), markup('1'), 3, 0)).toBe(2n);
  });

  it('charges nothing for a free model with no tokens, and only the request price with no tokens', () => {
    expect(chatCost(price('0', '0', '0'), markup('1'), 0, 0)).toBe(0n);
    expect(chatCost(price('0.001', '0.000002', '0.000005'), markup('3'), 0, 0)).toBe(1000n);
  });

  it('the markup multiplies token prices, never the request price', () => {
    const p = price('0.01', '0.000001', '0.000001');
    // 0.01 + 2 x (100 x 0.000001 + 100 x 0.000001) = 0.0104
    expect(chatCost(p, markup('2'), 100, 100)).toBe(10_400n);
    expect(chatCost(p, markup('1'), 100, 100)).toBe(10_200n);
  });

  it('stays exact for large token counts (no float drift)', () => {
    // 0.1 + 1.234567 x (1,000,000 x 0.000003 + 250,000 x 0.000015) = 0.1 + 1.234567 x 6.75 = 8.43332725
    expect(chatCost(price('0.1', '0.000003', '0.000015'), markup('1.234567'), 1_000_000, 250_000)).toBe(
      8_433_328n,
    );
  });

  it('end-user token price = cost x markup, as an exact decimal string', () => {
    expect(endUserTokenPrice(parseDecimal('0.000002', PRICE_DECIMALS)!, markup('1.5'))).toBe('0.000003');
    expect(endUserTokenPrice(parseDecimal('0.0000001', PRICE_DECIMALS)!, markup('1.25'))).toBe('0.000000125');
  });
});
