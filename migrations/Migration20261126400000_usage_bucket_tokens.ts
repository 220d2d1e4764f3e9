import { Migration } from '@mikro-orm/migrations';

/** The usage buckets the daily roll-ups sum besides the input and output totals (docs/reference.md §13). */
const COLUMNS = [
  'cache_read_tokens',
  'cache_write_tokens',
  'audio_prompt_tokens',
  'reasoning_tokens',
  'audio_completion_tokens',
];

/**
 * Usage reports by bucket (docs/reference.md §13): the daily roll-ups per model and the running totals per
 * end user keep the tokens of each usage bucket (cache read, cache write, audio prompt, reasoning, audio
 * completion) beside the prompt and completion totals. Roll-ups are a cache of the charges: the ones
 * written without the buckets are dropped here and rebuilt from the charges by the next usage read.
 */
export class Migration20261126400000_usage_bucket_tokens extends Migration {
  override name = 'Migration20261126400000_usage_bucket_tokens';

  override up(): void {
    this.addSql(`delete from "usage_day_model";`);
    this.addSql(`delete from "usage_day_user";`);
    this.addSql(`delete from "usage_rollup";`);
    for (const table of ['usage_day_model', 'usage_day_user']) {
      // The default only fills the add (the tables are empty); the roll-up writes every column.
      this.addSql(
        `alter table "${table}" ${COLUMNS.map((c) => `add column "${c}" bigint not null default 0`).join(', ')};`,
      );
      this.addSql(
        `alter table "${table}" ${COLUMNS.map((c) => `alter column "${c}" drop default`).join(', ')};`,
      );
    }
  }

  override down(): void {
    // Dropped with the columns, rebuilt without them on demand.
    this.addSql(`delete from "usage_day_model";`);
    this.addSql(`delete from "usage_day_user";`);
    this.addSql(`delete from "usage_rollup";`);
    for (const table of ['usage_day_model', 'usage_day_user'])
      this.addSql(`alter table "${table}" ${COLUMNS.map((c) => `drop column if exists "${c}"`).join(', ')};`);
  }
}
