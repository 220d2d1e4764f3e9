/**
 * `npm run migration:create` (diff entities against a scratch database at the applied migrations and
 * write a new migration under migrations/) and `npm run migrate` (apply pending migrations).
 */
import 'reflect-metadata';
import { loadConfig } from '../config.js';
import { Database } from './database.js';
import { exitOnStartupFailure } from '../shared/fatal.js';

const cmd = process.argv[2];
const config = loadConfig();
const db = await Database.open({ url: config.DATABASE_URL, dataDir: config.DATA_DIR }).catch(
  exitOnStartupFailure,
);
try {
  if (cmd === 'create') {
    await db.migrate(config);
    const res = await db.orm.migrator.create('migrations', false, false, process.argv[3]);
    console.log(res.fileName ? `created migrations/${res.fileName}` : 'no changes');
    console.log(res.diff.up.join('\n'));
  } else if (cmd === 'up') {
    console.log('applied:', await db.migrate(config));
  } else {
    console.error('usage: migration-cli create [name] | up');
    process.exitCode = 2;
  }
} finally {
  await db.close();
}
