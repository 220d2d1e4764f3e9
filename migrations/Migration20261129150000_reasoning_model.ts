import { Migration } from '@mikro-orm/migrations';

/**
 * `model_price.reasoning_model` (docs/reference.md §21 "Mapped"): the owner says a model reasons (true) or
 * does not (false), so thinking and reasoning effort are translated for it or dropped; null: the service's
 * catalogue of known models decides.
 */
export class Migration20261129150000_reasoning_model extends Migration {
  override name = 'Migration20261129150000_reasoning_model';

  override up(): void {
    this.addSql(`alter table "model_price" add "reasoning_model" boolean null;`);
  }

  override down(): void {
    this.addSql(`alter table "model_price" drop column "reasoning_model";`);
  }
}
