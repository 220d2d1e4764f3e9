import { Migration } from '@mikro-orm/migrations';

/**
 * Prices per usage bucket (docs/reference.md §13): cache read, cache write, audio prompt, reasoning and
 * audio completion. Null follows the default (the prompt price for the input buckets, the completion
 * price for the output ones), so every model priced before keeps charging exactly what it did.
 */
export class Migration20261126000000_usage_buckets extends Migration {
  override name = 'Migration20261126000000_usage_buckets';

  override up(): void {
    for (const column of [
      'cache_read_pico',
      'cache_write_pico',
      'audio_prompt_pico',
      'reasoning_pico',
      'audio_completion_pico',
    ])
      this.addSql(
        `alter table "model_price" add column if not exists "${column}" bigint null, add constraint "model_price_${column}_check" check (${column} >= 0);`,
      );
  }

  override down(): void {
    this.addSql(
      `alter table "model_price" drop column if exists "cache_read_pico", drop column if exists "cache_write_pico", drop column if exists "audio_prompt_pico", drop column if exists "reasoning_pico", drop column if exists "audio_completion_pico";`,
    );
  }
}
