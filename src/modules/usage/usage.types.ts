import { Field, Float, ID, Int, ObjectType, registerEnumType } from 'type-graphql';
import { MoneyScalar } from '../../graphql/scalars.js';
import type { UsageGroupBy, UsageReport, UsageRow } from './usage.service.js';

export const UsageGroupByEnum = { DAY: 'DAY', MODEL: 'MODEL', USER: 'USER' } as const satisfies {
  [K in UsageGroupBy]: K;
};
registerEnumType(UsageGroupByEnum, {
  name: 'UsageGroupBy',
  description:
    'DAY: one bucket per UTC day of the range (zeros included); MODEL: per model, by revenue; USER: the top end users by revenue.',
});

@ObjectType('UsageBucket', {
  description: 'Completed charges of one day, model or end user (or all of them).',
})
export class UsageBucketType {
  @Field({
    description:
      'DAY: the UTC date (YYYY-MM-DD); MODEL: the model id ("" for manual charges); USER: the external user id; "" for totals.',
  })
  key!: string;
  @Field(() => ID, { nullable: true, description: 'USER: the end user id.' }) userId!: string | null;
  @Field(() => Int, { description: 'Completed charges (chat requests and manual charges).' })
  requests!: number;
  @Field(() => MoneyScalar, { description: 'What the users were charged.' }) revenue!: bigint;
  @Field(() => MoneyScalar, {
    description:
      "Provider cost: what the ledger paid the built-in provider, else the tokens at the model's configured cost prices per usage bucket (no markup).",
  })
  providerCost!: bigint;
  @Field(() => MoneyScalar, { description: 'revenue − providerCost.' }) margin!: bigint;
  @Field(() => Float, {
    description:
      'All input tokens, cache read, cache write and audio prompt tokens included (a whole number; may exceed 32 bits).',
  })
  promptTokens!: number;
  @Field(() => Float, {
    description:
      'All output tokens, reasoning and audio completion tokens included (a whole number; may exceed 32 bits).',
  })
  completionTokens!: number;
  @Field(() => Float, {
    description: 'Cached input tokens read (part of promptTokens; docs/reference.md §13).',
  })
  cacheReadTokens!: number;
  @Field(() => Float, { description: 'Input tokens written to a cache (part of promptTokens).' })
  cacheWriteTokens!: number;
  @Field(() => Float, { description: 'Audio input tokens (part of promptTokens).' })
  audioPromptTokens!: number;
  @Field(() => Float, { description: 'Reasoning tokens (part of completionTokens).' })
  reasoningTokens!: number;
  @Field(() => Float, { description: 'Audio output tokens (part of completionTokens).' })
  audioCompletionTokens!: number;
  @Field(() => Float, { description: 'Image input tokens (part of promptTokens; docs/reference.md §22).' })
  imagePromptTokens!: number;
  @Field(() => Float, { description: 'Image output tokens (part of completionTokens).' })
  imageCompletionTokens!: number;
  @Field(() => Float, { description: 'Images charged per image (docs/reference.md §22).' })
  images!: number;
  @Field(() => Float, { description: 'Seconds of input audio charged per second.' })
  audioSeconds!: number;
  @Field(() => Float, { description: 'Characters of speech input charged per 1,000 characters.' })
  characters!: number;

  static from(r: UsageRow): UsageBucketType {
    return Object.assign(new UsageBucketType(), {
      key: r.key,
      userId: r.userId,
      requests: r.requests,
      revenue: r.revenueRaw,
      providerCost: r.costRaw,
      margin: r.revenueRaw - r.costRaw,
      promptTokens: r.promptTokens,
      completionTokens: r.completionTokens,
      cacheReadTokens: r.cacheReadTokens,
      cacheWriteTokens: r.cacheWriteTokens,
      audioPromptTokens: r.audioPromptTokens,
      reasoningTokens: r.reasoningTokens,
      audioCompletionTokens: r.audioCompletionTokens,
      imagePromptTokens: r.imagePromptTokens,
      imageCompletionTokens: r.imageCompletionTokens,
      images: r.images,
      audioSeconds: r.audioSeconds,
      characters: r.characters,
    });
  }
}

@ObjectType('Usage', {
  description: "A paywall's usage over UTC days [from, to], aggregated in SQL (docs/dashboard.md).",
})
export class UsageType {
  @Field({ description: 'First UTC day (YYYY-MM-DD).' }) from!: string;
  @Field({ description: 'Last UTC day, included.' }) to!: string;
  @Field(() => UsageGroupByEnum) groupBy!: UsageGroupBy;
  @Field(() => UsageBucketType, { description: 'The whole range.' }) totals!: UsageBucketType;
  @Field(() => [UsageBucketType]) buckets!: UsageBucketType[];

  static from(r: UsageReport): UsageType {
    return Object.assign(new UsageType(), {
      from: r.from,
      to: r.to,
      groupBy: r.groupBy,
      totals: UsageBucketType.from(r.totals),
      buckets: r.buckets.map(UsageBucketType.from),
    });
  }
}
