/**
 * Import rules of the house, checked by `npm run lint` (see docs/architecture.md):
 *
 *  1. No import cycle among the files of src/ and rest-compat/ (type-only imports count too: a cycle of
 *     types is still two files that cannot be understood one without the other).
 *  2. No file under src/modules/ imports the composition root (src/services.ts), the app (src/app.ts,
 *     src/main.ts, src/worker.ts, src/admin.ts) or a transport (rest-compat/, src/pages/, and the
 *     GraphQL server set-up: src/graphql/schema.ts, resolvers.ts, emit-schema.ts, live-connections.ts).
 *     Resolvers may use the GraphQL helpers (context, connection, scalars, errors).
 *
 * It reads the import graph with the TypeScript compiler API (the files tsconfig.json lists, resolved as
 * `tsc` resolves them), so it needs no extra package. Run it alone with `node scripts/check-imports.ts`.
 */
import path from 'node:path';
import ts from 'typescript';

// The repository (or, for the checker's own test, the directory given as the first argument).
const root = path.resolve(process.argv[2] ?? path.join(import.meta.dirname, '..'));
const rel = (f: string): string => path.relative(root, f).split(path.sep).join('/');

const FORBIDDEN_FOR_MODULES: ReadonlyArray<{ test: (to: string) => boolean; what: string }> = [
  { test: (to) => to === 'src/services.ts', what: 'the composition root' },
  {
    test: (to) => ['src/app.ts', 'src/main.ts', 'src/worker.ts', 'src/admin.ts'].includes(to),
    what: 'the app entry points',
  },
  { test: (to) => to.startsWith('rest-compat/'), what: 'a transport (REST)' },
  { test: (to) => to.startsWith('src/pages/'), what: 'a transport (pages)' },
  {
    test: (to) =>
      [
        'src/graphql/schema.ts',
        'src/graphql/resolvers.ts',
        'src/graphql/emit-schema.ts',
        'src/graphql/live-connections.ts',
      ].includes(to),
    what: 'the GraphQL server set-up',
  },
];

/** The files of src/ and rest-compat/ as tsconfig.json lists them, parsed (no type-checking: fast). */
function loadFiles(): { files: ts.SourceFile[]; options: ts.CompilerOptions } {
  const configPath = path.join(root, 'tsconfig.json');
  const parsed = ts.getParsedCommandLineOfConfigFile(
    configPath,
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  if (!parsed) throw new Error(`cannot read ${configPath}`);
  const files = parsed.fileNames.filter((f) => {
    const r = rel(f);
    return r.startsWith('src/') || r.startsWith('rest-compat/');
  });
  return {
    files: files.map((f) => ts.createSourceFile(f, ts.sys.readFile(f) ?? '', ts.ScriptTarget.Latest, true)),
    options: parsed.options,
  };
}

/** Every relative module specifier of a file: static imports, re-exports, and `import()` calls. */
function specifiers(sf: ts.SourceFile): string[] {
  const out: string[] = [];
  const visit = (node: ts.Node): void => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      out.push(node.moduleSpecifier.text);
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments.length > 0 &&
      ts.isStringLiteralLike(node.arguments[0])
    ) {
      out.push(node.arguments[0].text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      const lit = node.argument.literal;
      if (ts.isStringLiteral(lit)) out.push(lit.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out.filter((s) => s.startsWith('.'));
}

function buildGraph({ files, options }: ReturnType<typeof loadFiles>): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  const inScope = (r: string): boolean => r.startsWith('src/') || r.startsWith('rest-compat/');
  for (const sf of files) {
    const from = rel(sf.fileName);
    if (!inScope(from) || sf.isDeclarationFile) continue;
    const edges = new Set<string>();
    for (const spec of specifiers(sf)) {
      const resolved = ts.resolveModuleName(spec, sf.fileName, options, ts.sys).resolvedModule;
      if (!resolved) throw new Error(`${from}: cannot resolve ${spec}`);
      const to = rel(resolved.resolvedFileName);
      if (inScope(to)) edges.add(to);
    }
    graph.set(from, edges);
  }
  return graph;
}

/** Strongly connected components with more than one file (or a file importing itself): Tarjan. */
function cycles(graph: Map<string, Set<string>>): string[][] {
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const strong = (v: string): void => {
    idx.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, idx.get(w)!));
      }
    }
    if (low.get(v) === idx.get(v)) {
      const comp: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        comp.push(w);
      } while (w !== v);
      if (comp.length > 1 || graph.get(v)?.has(v)) out.push(comp.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!idx.has(v)) strong(v);
  return out;
}

/** One shortest cycle through `start` inside its component, for a readable message. */
function shortestCycle(graph: Map<string, Set<string>>, comp: Set<string>, start: string): string[] {
  const prev = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const w of graph.get(v) ?? []) {
      if (!comp.has(w)) continue;
      if (w === start) {
        const pathBack = [v];
        while (pathBack[0] !== start) pathBack.unshift(prev.get(pathBack[0])!);
        return [...pathBack, start];
      }
      if (!prev.has(w)) {
        prev.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start];
}

const graph = buildGraph(loadFiles());
const problems: string[] = [];

for (const comp of cycles(graph)) {
  const set = new Set(comp);
  problems.push(
    `import cycle among ${comp.length} file(s): ${shortestCycle(graph, set, comp[0]).join(' -> ')}` +
      (comp.length > 2 ? `\n    (all files in this cycle: ${comp.join(', ')})` : ''),
  );
}

for (const [from, edges] of graph) {
  if (!from.startsWith('src/modules/')) continue;
  for (const to of edges) {
    const rule = FORBIDDEN_FOR_MODULES.find((r) => r.test(to));
    if (!rule) continue;
    problems.push(`${from} imports ${to} (${rule.what}); a module receives what it needs instead`);
  }
}

if (problems.length > 0) {
  console.error(`check-imports: ${problems.length} problem(s)`);
  for (const p of problems) console.error(`  ${p}`);
  process.exit(1);
}
console.log(`check-imports: ${graph.size} files, no cycle, no forbidden import`);
