import { Arg, Ctx, Mutation, Resolver } from 'type-graphql';
import { requireAuth, type AppContext } from '../../graphql/context.js';
import { checkExternalId, triggerOf } from '../users/user.service.js';
import { rejectionError } from './proxy.service.js';
import { ChatCompletionInput, ChatCompletionType } from './proxy.types.js';

/** The OpenAI body of a GraphQL chat input: explicit fields over `extra`, nulls left out. */
function chatBody(input: ChatCompletionInput): Record<string, unknown> {
  const body: Record<string, unknown> = { ...(input.extra ?? {}) };
  body.model = input.model;
  body.messages = input.messages.map((m) =>
    Object.fromEntries(Object.entries({ ...m }).filter(([, v]) => v !== null && v !== undefined)),
  );
  if (input.maxTokens != null) body.max_tokens = input.maxTokens;
  if (input.maxCompletionTokens != null) body.max_completion_tokens = input.maxCompletionTokens;
  if (input.temperature != null) body.temperature = input.temperature;
  return body;
}

@Resolver()
export class ProxyResolver {
  @Mutation(() => ChatCompletionType, {
    description:
      'A whole chat completion for an end user, charged to their balance; a payment prompt (with `paywall` set) when they are not connected or cannot pay. Streams: POST /v1/chat/completions.',
  })
  async createChatCompletion(
    @Ctx() ctx: AppContext,
    @Arg('input') input: ChatCompletionInput,
  ): Promise<ChatCompletionType> {
    const auth = requireAuth(ctx);
    const paywall = await ctx.services.paywalls.resolve(auth, input.paywallId);
    const out = await ctx.services.proxy.chat({
      paywall,
      externalUserId: checkExternalId(input.user),
      body: chatBody(input),
      // An owner acting on a user's behalf is named in the events; an API key is the proxy's default.
      trigger: auth.kind === 'owner' ? triggerOf(auth, ctx.transport) : undefined,
    });
    if (!out || out.status !== 200) throw rejectionError(out);
    return ChatCompletionType.from(out.body);
  }
}
