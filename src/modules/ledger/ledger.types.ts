import { GraphQLJSONObject } from 'graphql-scalars';
import { Ctx, Field, ID, InputType, Int, ObjectType } from 'type-graphql';
import { storedBuckets, textUsage } from '../../shared/usage-buckets.js';
import { receiptOf } from '../accounts/receipt.js';
import type { AppContext } from '../../graphql/context.js';
import { MoneyScalar } from '../../graphql/scalars.js';
import { formatUsdc } from '../../shared/money.js';
import type { PaywallInfo } from '../paywalls/paywall-info.js';
import { Connection } from '../../graphql/connection.js';
import { EndUserType, userLoader } from '../users/user.types.js';
import type { ChargeResult, ChargeRow, DepositResult, LedgerEntryRow } from './ledger.service.js';

/** The user of a payload, loaded lazily (REST asks only for balances) and batched per request. */
async function loadUser(ctx: AppContext, paywall: PaywallInfo, userId: string): Promise<EndUserType> {
  const u = await userLoader(ctx).load(userId);
  if (!u) throw new Error(`end user ${userId} not found`);
  return EndUserType.from(u, paywall);
}

@InputType()
export class DepositInput {
  @Field(() => ID, { nullable: true, description: 'Required with an owner token; implied by an API key.' })
  paywallId?: string;
  @Field({ description: 'The end user (external id); created on first sight.' }) user!: string;
  @Field({ description: 'USDC decimal string > 0 with at most 6 fraction digits, e.g. "1.5".' })
  amount!: string;
  @Field(() => GraphQLJSONObject, { nullable: true, description: 'At most 50 keys and 8 KiB.' })
  metadata?: Record<string, unknown> | null;
  @Field(() => String, {
    nullable: true,
    description: 'Same as the REST Idempotency-Key header: a repeated key replays the first answer.',
  })
  idempotencyKey?: string | null;
}

@InputType()
export class ChargeInput extends DepositInput {}

@ObjectType()
export class DepositPayload {
  @Field({ description: 'Free balance after the deposit, raw units.' }) balance!: string;
  @Field() balanceFormatted!: string;
  @Field(() => ID) ledgerEntryId!: string;
  @Field({ description: 'True when this answer is the replay of an earlier one (same Idempotency-Key).' })
  replayed!: boolean;
  paywall!: PaywallInfo;
  userId!: string;

  @Field(() => EndUserType, { description: 'The user as of now.' })
  user(@Ctx() ctx: AppContext): Promise<EndUserType> {
    return loadUser(ctx, this.paywall, this.userId);
  }

  static from(r: DepositResult, replayed: boolean, paywall: PaywallInfo): DepositPayload {
    return Object.assign(new DepositPayload(), {
      balance: r.balanceRaw.toString(),
      balanceFormatted: formatUsdc(r.balanceRaw),
      ledgerEntryId: r.ledgerEntryId,
      replayed,
      paywall,
      userId: r.userId,
    });
  }
}

@ObjectType('ChargeUsage', {
  description:
    "A usage charge's tokens per bucket (docs/reference.md §13): each token in exactly one bucket. " +
    'promptTokens + cacheReadTokens + cacheWriteTokens + audioPromptTokens is all input; ' +
    'completionTokens + reasoningTokens + audioCompletionTokens all output.',
})
export class ChargeUsageType {
  @Field(() => Int, { description: 'Input not billed in another bucket.' }) promptTokens!: number;
  @Field(() => Int) cacheReadTokens!: number;
  @Field(() => Int) cacheWriteTokens!: number;
  @Field(() => Int) audioPromptTokens!: number;
  @Field(() => Int) reasoningTokens!: number;
  @Field(() => Int) audioCompletionTokens!: number;
  @Field(() => Int, { description: 'Image input tokens (gpt-image-1).' }) imagePromptTokens!: number;
  @Field(() => Int, { description: 'Image output tokens (gpt-image-1).' }) imageCompletionTokens!: number;
  @Field(() => Int, { description: 'Output not billed in another bucket.' }) completionTokens!: number;
  @Field(() => Int, { nullable: true, description: 'Images charged (docs/reference.md §22).' })
  images!: number | null;
  @Field(() => String, { nullable: true, description: 'Their size, e.g. "1024x1024".' }) imageSize!:
    string | null;
  @Field(() => String, { nullable: true, description: 'Their quality, e.g. "high".' }) imageQuality!:
    string | null;
  @Field(() => Int, { nullable: true, description: 'Seconds of input audio charged.' })
  audioSeconds!: number | null;
  @Field(() => Int, { nullable: true, description: 'Characters of speech input charged.' })
  characters!: number | null;
}

/** docs/reference.md §22: the units a charge kept (metadata.units), null where it has none. */
function chargedUnits(v: unknown) {
  const u = (typeof v === 'object' && v !== null ? v : {}) as Record<string, unknown>;
  const int = (x: unknown) => (typeof x === 'number' && Number.isInteger(x) ? x : null);
  const str = (x: unknown) => (typeof x === 'string' ? x : null);
  return {
    images: int(u.images),
    imageSize: str(u.imageSize),
    imageQuality: str(u.imageQuality),
    audioSeconds: int(u.audioSeconds),
    characters: int(u.characters),
  };
}

@ObjectType('ReceiptLine', { description: 'One usage bucket of a receipt.' })
export class ReceiptLineType {
  @Field({
    description:
      '`prompt`, `cacheRead`, `cacheWrite`, `audioPrompt`, `reasoning`, `audioCompletion` or `completion`.',
  })
  bucket!: string;
  @Field({ description: 'What the end user reads, e.g. "Cached input".' }) label!: string;
  @Field(() => Int) tokens!: number;
  @Field({ description: 'End-user price per token (cost x markup), exact USDC decimal string.' })
  unitPrice!: string;
  @Field({ description: "tokens x unitPrice, as in the answer's usage.cost_details." }) amount!: string;
}

@ObjectType('ReceiptUnits', {
  description:
    'What a charge counted besides tokens (docs/reference.md §22): images, seconds of audio, characters.',
})
export class ReceiptUnitsType {
  @Field({ description: '`images`, `audio_seconds` or `characters`.' }) kind!: string;
  @Field({ description: 'In words, e.g. "3 images 1024x1024 high", "94 s of audio", "1,820 characters".' })
  label!: string;
  @Field({ description: 'Their part of the charge (markup included), USDC.' }) amount!: string;
}

@ObjectType('Receipt', {
  description:
    'An itemised usage charge: the model, the tokens per bucket at their end-user prices, and the total ' +
    '(request price + the lines, rounded up to a raw unit), the same numbers as the charge.',
})
export class ReceiptType {
  @Field() model!: string;
  @Field({ description: 'Price per request (not marked up), USDC.' }) requestPrice!: string;
  @Field(() => [ReceiptLineType]) lines!: ReceiptLineType[];
  @Field(() => [ReceiptUnitsType], { description: 'Units charged besides tokens (empty for chat).' })
  units!: ReceiptUnitsType[];
  @Field({ description: 'The cost, USDC with 6 decimals (= amount + uncollected).' }) total!: string;
  @Field({
    description:
      'The cost in raw units of 10⁻⁶ USDC, an integer string like `balance` (e.g. "6381" for total "0.006381").',
  })
  totalRaw!: string;
  /** The charge's id and what the balance paid of the total (for refunds and the net, refund.resolver.ts). */
  chargeId!: string;
  paidRaw!: bigint;
}

@ObjectType('Charge', { description: 'A manual charge, or the usage charge (hold) of a chat request.' })
export class ChargeType {
  @Field(() => ID) id!: string;
  @Field({ description: '`manual` or `usage`.' }) kind!: string;
  @Field({ description: '`held`, `completed`, `released` or `failed`.' }) status!: string;
  @Field(() => MoneyScalar, { description: 'Captured (or, when failed, requested) amount.' }) amount!: bigint;
  @Field(() => MoneyScalar, { description: 'Reserved while the request ran.' }) hold!: bigint;
  @Field(() => MoneyScalar, {
    description:
      'Usage beyond the hold that the free balance could not pay either (recorded at settlement; the user owes it).',
  })
  uncollected!: bigint;
  @Field(() => MoneyScalar, { description: 'How much of `uncollected` later deposits repaid.' })
  recovered!: bigint;
  @Field(() => String, { nullable: true }) errorCode!: string | null;
  @Field(() => String, { nullable: true }) model!: string | null;
  @Field(() => Int, { nullable: true, description: 'All input tokens (cache and audio included).' })
  promptTokens!: number | null;
  @Field(() => Int, { nullable: true, description: 'All output tokens (reasoning and audio included).' })
  completionTokens!: number | null;
  @Field(() => GraphQLJSONObject) metadata!: Record<string, unknown>;
  @Field() createdAt!: string;
  @Field(() => String, { nullable: true }) settledAt!: string | null;
  @Field(() => ID, { nullable: true, description: 'The end-user key the request came with (UserKey.id).' })
  userKeyId!: string | null;

  @Field(() => ChargeUsageType, {
    nullable: true,
    description: "A settled usage charge's tokens per bucket; null for manual charges and open holds.",
  })
  usage(): ChargeUsageType | null {
    if (this.kind !== 'usage' || this.promptTokens === null || this.completionTokens === null) return null;
    const b = storedBuckets(this.metadata.buckets) ?? textUsage(this.promptTokens, this.completionTokens);
    return Object.assign(new ChargeUsageType(), {
      promptTokens: b.prompt,
      cacheReadTokens: b.cacheRead,
      cacheWriteTokens: b.cacheWrite,
      audioPromptTokens: b.audioPrompt,
      reasoningTokens: b.reasoning,
      audioCompletionTokens: b.audioCompletion,
      imagePromptTokens: b.imagePrompt,
      imageCompletionTokens: b.imageCompletion,
      completionTokens: b.completion,
      ...chargedUnits(this.metadata.units),
    });
  }

  @Field(() => ReceiptType, {
    nullable: true,
    description:
      'The itemised receipt of a usage charge (docs/reference.md §13); null for manual charges, open ' +
      'holds, charges with nothing charged, and usage charged before receipts were kept.',
  })
  receipt(): ReceiptType | null {
    const r = receiptOf(this);
    if (!r) return null;
    return Object.assign(new ReceiptType(), {
      ...r,
      totalRaw: r.totalRaw.toString(),
      chargeId: this.id,
      paidRaw: this.status === 'completed' ? this.amount + this.recovered : 0n,
      lines: r.lines.map((l) => Object.assign(new ReceiptLineType(), l)),
      units: r.units.map((u) => Object.assign(new ReceiptUnitsType(), u)),
    });
  }

  static from(c: ChargeRow): ChargeType {
    return Object.assign(new ChargeType(), {
      ...c,
      amount: c.amountRaw,
      hold: c.holdRaw,
      uncollected: c.uncollectedRaw,
      recovered: c.recoveredRaw,
      createdAt: c.createdAt.toISOString(),
      settledAt: c.settledAt ? c.settledAt.toISOString() : null,
      userKeyId: c.userKeyId,
    });
  }
}

@ObjectType()
export class ChargePayload {
  @Field() success!: boolean;
  @Field() message!: string;
  @Field(() => String, { nullable: true, description: 'When refused: the top-up or connect link to show.' })
  url!: string | null;
  @Field(() => String, {
    nullable: true,
    description:
      "`insufficient_balance`, `not_connected`, `charge_limit_exceeded` (SHARED: above the operator's cap on one manual charge), or `allowance_exceeded` (SHARED: over the spending limit the wallet user set for the app).",
  })
  errorCode!: string | null;
  @Field(() => ID, {
    description: "The charge's id (also when refused): `activityId` of its events (docs/reference.md §16).",
  })
  chargeId!: string;
  @Field(() => ChargeType) charge!: ChargeType;
  @Field({ description: 'Free balance after the attempt, raw units.' }) balance!: string;
  @Field() balanceFormatted!: string;
  @Field() replayed!: boolean;
  paywall!: PaywallInfo;
  userId!: string;

  @Field(() => EndUserType, { description: 'The user as of now.' })
  user(@Ctx() ctx: AppContext): Promise<EndUserType> {
    return loadUser(ctx, this.paywall, this.userId);
  }

  static from(r: ChargeResult, replayed: boolean, paywall: PaywallInfo): ChargePayload {
    return Object.assign(new ChargePayload(), {
      success: r.success,
      message: r.message,
      url: r.url,
      errorCode: r.errorCode,
      chargeId: r.chargeId,
      charge: Object.assign(new ChargeType(), {
        id: r.chargeId,
        kind: 'manual',
        status: r.status,
        amount: r.amountRaw,
        hold: 0n,
        uncollected: 0n,
        recovered: 0n,
        errorCode: r.errorCode,
        model: null,
        promptTokens: null,
        completionTokens: null,
        metadata: r.metadata,
        createdAt: r.createdAt,
        settledAt: r.createdAt,
      }),
      balance: r.balanceRaw.toString(),
      balanceFormatted: formatUsdc(r.balanceRaw),
      replayed,
      paywall,
      userId: r.userId,
    });
  }
}

@ObjectType('LedgerEntry', { description: 'One change of a settled balance (append-only).' })
export class LedgerEntryType {
  @Field(() => ID) id!: string;
  @Field({ description: '`deposit`, `charge`, `usage` or `trial`.' }) kind!: string;
  @Field(() => MoneyScalar, { description: 'Signed: credits positive, debits negative.' }) amount!: bigint;
  @Field({ description: 'Signed amount in raw units.' }) amountRaw!: string;
  @Field(() => MoneyScalar, { description: 'Settled balance after this entry.' }) balanceAfter!: bigint;
  @Field(() => ID, { nullable: true }) chargeId!: string | null;
  @Field(() => GraphQLJSONObject) metadata!: Record<string, unknown>;
  @Field() createdAt!: string;

  static from(e: LedgerEntryRow): LedgerEntryType {
    return Object.assign(new LedgerEntryType(), {
      id: e.id,
      kind: e.kind,
      amount: e.amountRaw,
      amountRaw: e.amountRaw.toString(),
      balanceAfter: e.balanceAfterRaw,
      chargeId: e.chargeId,
      metadata: e.metadata ?? {},
      createdAt: e.createdAt.toISOString(),
    });
  }
}

export const LedgerEntryConnection = Connection(LedgerEntryType, {
  connection: 'LedgerEntryConnection',
  edge: 'LedgerEntryEdge',
});
export type LedgerEntryConnection = InstanceType<typeof LedgerEntryConnection>;

export const ChargeConnection = Connection(ChargeType, {
  connection: 'ChargeConnection',
  edge: 'ChargeEdge',
});
export type ChargeConnection = InstanceType<typeof ChargeConnection>;
