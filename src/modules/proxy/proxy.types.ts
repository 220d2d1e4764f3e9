import { GraphQLJSONObject } from 'graphql-scalars';
import { Field, Float, ID, InputType, Int, ObjectType } from 'type-graphql';
import { JSONScalar } from '../../graphql/scalars.js';

@InputType({ description: 'One chat message (spec "Message").' })
export class ChatMessageInput {
  @Field({ description: '`system`, `user` or `assistant` (also `tool`, `developer`, `function`).' })
  role!: string;
  @Field(() => String, { nullable: true }) content?: string | null;
  @Field(() => String, { nullable: true, description: 'Pattern ^[a-zA-Z0-9_]{1,64}$.' }) name?: string | null;
}

@InputType({ description: 'A chat-completion request (whole answers; streams use REST).' })
export class ChatCompletionInput {
  @Field(() => ID, { nullable: true, description: 'Required with an owner token; implied by an API key.' })
  paywallId?: string;
  @Field() model!: string;
  @Field(() => [ChatMessageInput]) messages!: ChatMessageInput[];
  @Field(() => String, { nullable: true, description: 'The end user to charge (required).' }) user?:
    string | null;
  @Field(() => Int, { nullable: true }) maxTokens?: number | null;
  @Field(() => Int, { nullable: true }) maxCompletionTokens?: number | null;
  @Field(() => Float, { nullable: true }) temperature?: number | null;
  @Field(() => GraphQLJSONObject, {
    nullable: true,
    description: 'Any other OpenAI parameter (tools, response_format, top_p, …), passed through as is.',
  })
  extra?: Record<string, unknown> | null;
}

@ObjectType('ChatCompletionMessage')
export class ChatCompletionMessageType {
  @Field() role!: string;
  @Field(() => String, { nullable: true }) content!: string | null;
  @Field(() => JSONScalar, { nullable: true, description: 'Tool calls as the provider sent them.' })
  toolCalls!: unknown;
}

@ObjectType('ChatCompletionChoice')
export class ChatCompletionChoiceType {
  @Field(() => Int) index!: number;
  @Field(() => ChatCompletionMessageType) message!: ChatCompletionMessageType;
  @Field(() => String, { nullable: true }) finishReason!: string | null;
}

@ObjectType('ChatCompletionUsage')
export class ChatCompletionUsageType {
  @Field(() => Int) promptTokens!: number;
  @Field(() => Int) completionTokens!: number;
  @Field(() => Int) totalTokens!: number;
  @Field({ description: 'Amount charged to the user, USDC decimal string.' }) cost!: string;
}

@ObjectType('PaywallBlock', { description: 'Why a reply is a payment prompt instead of a completion.' })
export class PaywallBlockType {
  @Field({ description: '`not_connected`, `insufficient_balance` or `rate_limited`.' }) reason!: string;
  @Field(() => String, {
    nullable: true,
    description: 'The connect or top-up link (null when rate limited).',
  })
  url!: string | null;
  @Field(() => String, {
    nullable: true,
    description: 'rate_limited: when the daily limit resets (ISO time).',
  })
  resetsAt!: string | null;
}

@ObjectType('ChatCompletion')
export class ChatCompletionType {
  @Field() id!: string;
  @Field() object!: string;
  @Field(() => Float, { description: 'Unix seconds.' }) created!: number;
  @Field() model!: string;
  @Field(() => [ChatCompletionChoiceType]) choices!: ChatCompletionChoiceType[];
  @Field(() => ChatCompletionUsageType, { nullable: true }) usage!: ChatCompletionUsageType | null;
  @Field(() => PaywallBlockType, { nullable: true, description: 'Set when payment blocked the request.' })
  paywall!: PaywallBlockType | null;

  /** Shapes the OpenAI JSON answer (completion or blocked reply) for GraphQL. */
  static from(body: Record<string, any>): ChatCompletionType {
    const usage = body.usage;
    const choices = Array.isArray(body.choices) ? body.choices : [];
    return Object.assign(new ChatCompletionType(), {
      id: String(body.id ?? ''),
      object: String(body.object ?? 'chat.completion'),
      created: Number(body.created ?? Math.floor(Date.now() / 1000)),
      model: String(body.model ?? ''),
      choices: choices.map((c: any, i: number) =>
        Object.assign(new ChatCompletionChoiceType(), {
          index: typeof c?.index === 'number' ? c.index : i,
          finishReason: c?.finish_reason ?? null,
          message: Object.assign(new ChatCompletionMessageType(), {
            role: c?.message?.role ?? 'assistant',
            content: typeof c?.message?.content === 'string' ? c.message.content : null,
            toolCalls: c?.message?.tool_calls ?? null,
          }),
        }),
      ),
      usage: usage
        ? Object.assign(new ChatCompletionUsageType(), {
            promptTokens: usage.prompt_tokens ?? 0,
            completionTokens: usage.completion_tokens ?? 0,
            totalTokens: usage.total_tokens ?? (usage.prompt_tokens ?? 0) + (usage.completion_tokens ?? 0),
            cost: String(usage.cost ?? '0'),
          })
        : null,
      paywall: body.paywall
        ? Object.assign(new PaywallBlockType(), { resetsAt: null, ...body.paywall })
        : null,
    });
  }
}
