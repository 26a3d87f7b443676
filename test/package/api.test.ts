// The published API, name by name and type by type, against test/package/__snapshots__/api.txt: a new
// export, a changed signature or an internal that leaks into the package's types shows up here
// as a diff to review (`vitest -u` accepts it).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ENTRY_POINTS = ['src/index.ts', 'src/http/fastify.ts', 'src/observe/prometheus.ts', 'src/observe/opentelemetry.ts'];
const FULL = ts.TypeFormatFlags.NoTruncation | ts.TypeFormatFlags.UseSingleQuotesForStringLiteralType;

/** Whether a declaration is marked `@internal`: tsconfig.build.json's stripInternal leaves it out of the .d.ts. */
const isInternal = (node: ts.Node): boolean => ts.getJSDocTags(node).some((tag) => tag.tagName.text === 'internal');

/** Whether a declaration is in this project's sources (not in a dependency's types). */
const fromHere = (node: ts.Node): boolean => !node.getSourceFile().fileName.includes('/node_modules/');

/** One line per exported name (sorted), then one per public member of classes and interfaces. */
function surface(program: ts.Program, file: string): string[] {
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file) as ts.SourceFile;
  const module = checker.getSymbolAtLocation(source) as ts.Symbol;
  const typeOf = (s: ts.Symbol, at: ts.Node): string => checker.typeToString(checker.getTypeOfSymbolAtLocation(s, at), at, FULL);
  const lines: string[] = [];
  const members = (props: ts.Symbol[], at: ts.Node, indent: string): void => {
    for (const p of [...props].sort((a, b) => a.name.localeCompare(b.name))) {
      const decl = p.valueDeclaration ?? p.declarations?.[0];
      if (p.name.startsWith('#') || p.name.startsWith('__#') || p.name === 'prototype') continue; // #private members
      if (decl !== undefined && !fromHere(decl)) continue; // inherited from Error, Node's types: not ours
      if (decl !== undefined && isInternal(decl)) continue; // stripped from the .d.ts (stripInternal)
      const flags = decl === undefined ? 0 : ts.getCombinedModifierFlags(decl as ts.Declaration);
      if ((flags & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) !== 0) continue;
      const readonly = (flags & ts.ModifierFlags.Readonly) !== 0 ? 'readonly ' : '';
      const optional = (p.flags & ts.SymbolFlags.Optional) !== 0 ? '?' : '';
      // A well-known symbol's member is named __@dispose@<id> by the checker: the id varies.
      const name = p.name.replace(/^__@(\w+)@\d+$/, '[Symbol.$1]');
      lines.push(`${indent}${readonly}${name}${optional}: ${typeOf(p, decl ?? at)}`);
    }
  };
  const exports = [...checker.getExportsOfModule(module)].sort((a, b) => a.name.localeCompare(b.name));
  for (const exported of exports) {
    const s = (exported.flags & ts.SymbolFlags.Alias) !== 0 ? checker.getAliasedSymbol(exported) : exported;
    const decl = (s.valueDeclaration ?? s.declarations?.[0]) as ts.Node;
    const name = exported.name;
    if ((s.flags & ts.SymbolFlags.Class) !== 0) {
      const onlyType = (exported.flags & ts.SymbolFlags.Alias) !== 0 && (exported.declarations ?? []).every((d) => ts.isExportSpecifier(d) && (d.isTypeOnly || d.parent.parent.isTypeOnly));
      lines.push(`class ${name}${onlyType ? ' (type only)' : ''}`);
      const statics = checker.getTypeOfSymbolAtLocation(s, decl);
      if (!onlyType) {
        for (const sig of statics.getConstructSignatures()) {
          const ctor = sig.getDeclaration() as ts.Declaration | undefined;
          if (ctor !== undefined && isInternal(ctor)) continue; // stripped from the .d.ts (stripInternal)
          const hidden = ctor !== undefined && (ts.getCombinedModifierFlags(ctor) & ts.ModifierFlags.Private) !== 0;
          lines.push(hidden ? '  new: private' : `  new${checker.signatureToString(sig, decl, FULL)}`);
        }
        members(checker.getPropertiesOfType(statics), decl, '  static ');
      }
      members(checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(s)), decl, '  ');
    } else if ((s.flags & ts.SymbolFlags.Interface) !== 0) {
      lines.push(`interface ${name}`);
      members(checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(s)), decl, '  ');
    } else if ((s.flags & ts.SymbolFlags.TypeAlias) !== 0) {
      lines.push(`type ${name} = ${checker.typeToString(checker.getDeclaredTypeOfSymbol(s), decl, FULL | ts.TypeFormatFlags.InTypeAlias)}`);
    } else if ((s.flags & ts.SymbolFlags.Function) !== 0) {
      for (const sig of checker.getTypeOfSymbolAtLocation(s, decl).getCallSignatures()) lines.push(`function ${name}${checker.signatureToString(sig, decl, FULL)}`);
    } else {
      lines.push(`const ${name}: ${typeOf(s, decl)}`);
    }
  }
  return lines;
}

describe('the published API', () => {
  it('is what test/package/__snapshots__/api.txt says, export by export', async () => {
    const program = ts.createProgram(ENTRY_POINTS, {
      target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext,
      strict: true, skipLibCheck: true, types: ['node'], noEmit: true,
    });
    // Types the checker can only name by import("/abs/path/...") are written relative to the
    // project, so that the snapshot does not depend on where the checkout lives.
    const root = fileURLToPath(new URL('../../', import.meta.url));
    const text = ENTRY_POINTS.map((file) => [`# ${file}`, ...surface(program, file)].join('\n')).join('\n\n').replaceAll(root, './');
    await expect(`${text}\n`).toMatchFileSnapshot('./__snapshots__/api.txt');
  }, 60_000);

  it('ships no internal in the built types: attach()\'s way into a constructor is stripped', () => {
    // npm test builds first; the snapshot above reads the sources, this the .d.ts users get.
    const dist = new URL('../../dist/', import.meta.url);
    const files = ['rate/rate-limiter.d.ts', 'policy/policy-limiter.d.ts', 'concurrency/concurrency-limiter.d.ts'];
    for (const file of files) {
      const text = readFileSync(new URL(file, dist), 'utf8');
      expect(text.match(/constructor\(/g), file).toHaveLength(1);
      expect(text, file).not.toContain('AttachRequest');
    }
  });
});
