import { defineEntity, p } from '@mikro-orm/core';

/** A developer account. Its token is stored only as a SHA-256 hash. */
export const OwnerSchema = defineEntity({
  name: 'Owner',
  tableName: 'owner',
  properties: {
    id: p.uuid().primary(),
    name: p.string().length(200),
    tokenHash: p.string().length(64).unique(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
export class Owner extends OwnerSchema.class {}
OwnerSchema.setClass(Owner);
