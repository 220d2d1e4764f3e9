/** `npm run schema`: writes schema.graphql at the repo root from the resolvers. */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { printSchemaFile } from './schema.js';

writeFileSync(new URL('../../../schema.graphql', import.meta.url), await printSchemaFile());
console.log('schema.graphql written');
