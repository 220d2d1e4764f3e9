import { Migration } from '@mikro-orm/migrations';

/** The per-token prices of image input and image output (null: the prompt / completion price). */
const IMAGE_BUCKET_COLUMNS = ['image_prompt_pico', 'image_completion_pico'];
/** The prices per unit: per second of input audio, per 1,000 input characters (null: not priced so). */
const UNIT_COLUMNS = ['audio_second_pico', 'characters_1k_pico'];
/** What the daily roll-ups sum besides the buckets of before: the image buckets and the units. */
const ROLLUP_COLUMNS = [
  'image_prompt_tokens',
  'image_completion_tokens',
  'images',
  'audio_seconds',
  'characters',
];

/**
 * Images and audio (docs/reference.md §22): a model is priced per token bucket as before, plus the image
 * buckets (gpt-image-1's image input and output tokens), and per unit: a list of prices per image by size
 * and quality (`[{size, quality, pico}]`, pico-USDC as a decimal string), per second of input audio and
 * per 1,000 input characters. Every model priced before keeps charging exactly what it did. The usage
 * roll-ups (a cache of the charges) keep the image buckets and the units too: the ones written without
 * them are dropped and rebuilt from the charges by the next usage read.
 */
export class Migration20261129200000_media_prices extends Migration {
  override name = 'Migration20261129200000_media_prices';

  override up(): void {
    for (const column of [...IMAGE_BUCKET_COLUMNS, ...UNIT_COLUMNS])
      this.addSql(
        `alter table "model_price" add column if not exists "${column}" bigint null, add constraint "model_price_${column}_check" check (${column} >= 0);`,
      );
    this.addSql(
      `alter table "model_price" add column if not exists "image_prices" jsonb not null default '[]';`,
    );
    this.addSql(`delete from "usage_day_model";`);
    this.addSql(`delete from "usage_day_user";`);
    this.addSql(`delete from "usage_rollup";`);
    for (const table of ['usage_day_model', 'usage_day_user']) {
      // The default only fills the add (the tables are empty); the roll-up writes every column.
      this.addSql(
        `alter table "${table}" ${ROLLUP_COLUMNS.map((c) => `add column "${c}" bigint not null default 0`).join(', ')};`,
      );
      this.addSql(
        `alter table "${table}" ${ROLLUP_COLUMNS.map((c) => `alter column "${c}" drop default`).join(', ')};`,
      );
    }
  }

  override down(): void {
    this.addSql(`delete from "usage_day_model";`);
    this.addSql(`delete from "usage_day_user";`);
    this.addSql(`delete from "usage_rollup";`);
    for (const table of ['usage_day_model', 'usage_day_user'])
      this.addSql(
        `alter table "${table}" ${ROLLUP_COLUMNS.map((c) => `drop column if exists "${c}"`).join(', ')};`,
      );
    this.addSql(
      `alter table "model_price" ${[...IMAGE_BUCKET_COLUMNS, ...UNIT_COLUMNS, 'image_prices'].map((c) => `drop column if exists "${c}"`).join(', ')};`,
    );
  }
}
