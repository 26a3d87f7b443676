import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

/** One fenced code block of a Markdown file. */
export interface DocBlock {
  /** The file, relative to the repository root. */
  file: string;
  /** The line of its opening fence (1-based). */
  line: number;
  /** What follows the opening fence: `js`, `ts`, `sh`, `text`, or '' when nothing does. */
  lang: string;
  code: string;
}

/** The Markdown files the docs test reads: the README and every guide under docs/. */
export function docFiles(root: string): string[] {
  return ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
}

/** Every fenced block of `file` (``` fences, as CommonMark reads them, indented up to three spaces or in a list item). */
export function blocksOf(root: string, file: string): DocBlock[] {
  const lines = readFileSync(join(root, file), 'utf8').split('\n');
  const out: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\S*)\s*$/.exec(lines[i] as string);
    if (open === null) continue;
    const indent = (open[1] as string).length;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length && !/^\s*```\s*$/.test(lines[j] as string); j++) body.push((lines[j] as string).slice(indent));
    if (j === lines.length) throw new Error(`${file}:${i + 1}: a code block that never closes`);
    out.push({ file, line: i + 1, lang: open[2] as string, code: `${body.join('\n')}\n` });
    i = j;
  }
  return out;
}

/** What `typeCheck` reports for one block: each diagnostic as `file:line: message`. */
export interface BlockReport {
  block: DocBlock;
  errors: string[];
}

/**
 * Type-checks each `js` and `ts` block as a module of its own in the repository's root, `sluice`
 * resolved to the built package (its own `exports`) and every other import from node_modules.
 * `ts` blocks get the project's compiler options (strict). `js` blocks are checked as a
 * JavaScript user's editor checks them (`checkJs`, not strict): names that do not exist, imports
 * that do not resolve, options and arguments of the wrong name or type. A `ts` block that
 * declares an interface or type named like one of the package's exported types is also held to
 * it: the two must be mutually assignable, so a block that shows a type stays true to it.
 */
export function typeCheck(root: string, blocks: readonly DocBlock[]): BlockReport[] {
  const config = ts.readConfigFile(join(root, 'tsconfig.json'), (p) => ts.sys.readFile(p));
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
  const options: ts.CompilerOptions = {
    ...parsed.options, noEmit: true, allowJs: true, checkJs: true, noUnusedLocals: false, noUnusedParameters: false,
    moduleDetection: ts.ModuleDetectionKind.Force,
  };
  // The exports and the ts blocks are checked under the same options: they share what the
  // compiler read (the standard library, @types/node, the package's declarations).
  const shared = sharingHost(options);
  const exported = exportedTypeNames(root, options, shared);
  const ts_ = blocks.filter((b) => b.lang === 'ts');
  const js = blocks.filter((b) => b.lang === 'js');
  const jsOptions = { ...options, strict: false, noImplicitAny: false, strictNullChecks: false };
  return [
    ...checkGroup(root, ts_, 'ts', options, exported, shared),
    ...checkGroup(root, js, 'js', jsOptions, exported, ts.createCompilerHost(jsOptions)),
  ];
}

/** A compiler host that parses each file once, for programs made under the same options. */
function sharingHost(options: ts.CompilerOptions): ts.CompilerHost {
  const host = ts.createCompilerHost(options);
  const parsed = new Map<string, ts.SourceFile | undefined>();
  const { getSourceFile } = host;
  host.getSourceFile = (p, lang, onError, create) => {
    if (!parsed.has(p)) parsed.set(p, getSourceFile.call(host, p, lang, onError, create));
    return parsed.get(p);
  };
  return host;
}

function checkGroup(
  root: string, blocks: readonly DocBlock[], ext: string, options: ts.CompilerOptions, exported: Map<string, string>, base: ts.CompilerHost,
): BlockReport[] {
  const virtual = new Map<string, DocBlock>();
  blocks.forEach((b, n) => virtual.set(join(root, `doc-block-${n}.${ext}`), b));
  const source = (b: DocBlock): string => (b.lang === 'ts' ? b.code + typeEqualities(b.code, exported) : b.code);
  const host: ts.CompilerHost = {
    ...base,
    fileExists: (p) => virtual.has(p) || base.fileExists(p),
    readFile: (p) => {
      const b = virtual.get(p);
      return b === undefined ? base.readFile(p) : source(b);
    },
    getSourceFile: (p, lang, onError, create) => {
      const b = virtual.get(p);
      return b === undefined ? base.getSourceFile(p, lang, onError, create) : ts.createSourceFile(p, source(b), lang, true);
    },
  };
  const program = ts.createProgram([...virtual.keys()], options, host);
  const reports: BlockReport[] = [];
  for (const [path, block] of virtual) {
    const sf = program.getSourceFile(path);
    if (sf === undefined) throw new Error(`no source for ${relative(root, path)}`);
    const diagnostics = [...program.getSyntacticDiagnostics(sf), ...program.getSemanticDiagnostics(sf)];
    const errors = diagnostics.map((d) => {
      const at = d.start === undefined ? 0 : sf.getLineAndCharacterOfPosition(d.start).line;
      const inBlock = at < block.code.split('\n').length - 1;
      const where = inBlock ? `${block.file}:${block.line + 1 + at}` : `${block.file}:${block.line} (the type held to the package's)`;
      return `${where}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
    });
    reports.push({ block, errors });
  }
  return reports;
}

/** The type names the package exports (its built index.d.ts and sluice/fastify). */
function exportedTypeNames(root: string, options: ts.CompilerOptions, host: ts.CompilerHost): Map<string, string> {
  const entries = { sluice: join(root, 'dist/index.d.ts'), 'sluice/fastify': join(root, 'dist/http/fastify.d.ts') };
  const program = ts.createProgram(Object.values(entries), options, host);
  const checker = program.getTypeChecker();
  const names = new Map<string, string>();
  for (const [spec, path] of Object.entries(entries)) {
    const sf = program.getSourceFile(path);
    const symbol = sf === undefined ? undefined : checker.getSymbolAtLocation(sf);
    if (symbol === undefined) throw new Error(`cannot read the exports of ${path}: build first`);
    for (const e of checker.getExportsOfModule(symbol)) {
      const target = e.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(e) : e;
      if (target.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias) && !names.has(e.name)) names.set(e.name, spec);
    }
  }
  return names;
}

/**
 * For each top-level interface or type alias of `code` named like an exported type: lines that
 * fail to compile unless the block's type and the package's are mutually assignable.
 */
function typeEqualities(code: string, exported: Map<string, string>): string {
  const sf = ts.createSourceFile('x.ts', code, ts.ScriptTarget.ES2022, true);
  let out = '';
  for (const s of sf.statements) {
    if (!ts.isInterfaceDeclaration(s) && !ts.isTypeAliasDeclaration(s)) continue;
    const name = s.name.text;
    const spec = exported.get(name);
    if (spec === undefined || s.typeParameters !== undefined) continue;
    out += `\ntype __Pkg${name} = import('${spec}').${name};\n` +
      `const __to${name}: __Pkg${name} = null as unknown as ${name}; void __to${name};\n` +
      `const __from${name}: ${name} = null as unknown as __Pkg${name}; void __from${name};\n`;
  }
  return out;
}
