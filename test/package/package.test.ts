// The package as a user gets it: packed from a checkout that has no dist/ (as a git install or a
// fresh clone is: `prepare` builds it), installed from the tarball into a project of its own, and
// used from ESM, from CommonJS (require of an ES module, Node 20.19 and later), through its
// `sluice` command, and from TypeScript projects of both kinds (module "nodenext").
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name: string; version: string; engines: { node: string } };
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** What every consumer runs: three requests on a limit of two a minute (no stall refills one). */
const USE = `const limiter = new RateLimiter({ limit: perMinute(2), maxKeys: 4 });
console.log(JSON.stringify([limiter.allow('k'), limiter.allow('k'), limiter.allow('k')]));`;

let dir = '';
let tarball = '';
let files: string[] = [];
let consumer = '';

function run(cwd: string, file: string, args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(file, args, { cwd, encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('the packed package, installed into a project of its own', () => {
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-package-'));
    // A checkout without dist/: what `npm pack` must build through `prepare`.
    const checkout = join(dir, 'checkout');
    mkdirSync(checkout);
    for (const f of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'README.md', 'LICENSE', 'src']) {
      cpSync(join(root, f), join(checkout, f), { recursive: true });
    }
    symlinkSync(join(root, 'node_modules'), join(checkout, 'node_modules'), 'dir');
    const out = execFileSync(npm, ['pack', '--json', '--pack-destination', dir], { cwd: checkout, encoding: 'utf8', timeout: 120_000 });
    const packed = (JSON.parse(out.slice(out.indexOf('['))) as { filename: string; files: { path: string }[] }[])[0] as { filename: string; files: { path: string }[] };
    tarball = join(dir, packed.filename);
    files = packed.files.map((f) => f.path);
    // The consumer: its own folder, the tarball installed without the network (no dependencies).
    consumer = join(dir, 'consumer');
    mkdirSync(consumer);
    writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
    execFileSync(npm, ['install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: consumer, encoding: 'utf8', timeout: 120_000 });
  }, 180_000);

  afterAll(() => {
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('ships the built code, its types, source maps with their sources, README and LICENSE; not the repository', () => {
    for (const f of ['package.json', 'README.md', 'LICENSE', 'dist/index.js', 'dist/index.d.ts', 'dist/cli/main.js']) expect(files).toContain(f);
    expect(files.filter((f) => !f.startsWith('dist/') && !['package.json', 'README.md', 'LICENSE'].includes(f))).toEqual([]);
    // The maps carry the TypeScript they point to (src/ is not shipped).
    const map = JSON.parse(readFileSync(join(consumer, 'node_modules', 'sluice', 'dist', 'index.js.map'), 'utf8')) as { sourcesContent?: string[] };
    expect(map.sourcesContent?.[0]).toMatch(/export \{/);
  });

  it('works from an ES module', () => {
    writeFileSync(join(consumer, 'esm.mjs'), `import { RateLimiter, perMinute } from 'sluice';\n${USE}\n`);
    expect(run(consumer, process.execPath, ['esm.mjs'])).toMatchObject({ status: 0, stdout: '[true,true,false]\n' });
  });

  it('sluice/fastify loads without Fastify installed (it imports Fastify types only)', () => {
    writeFileSync(join(consumer, 'fastify.mjs'), "import { sluice } from 'sluice/fastify';\nconsole.log(typeof sluice);\n");
    expect(run(consumer, process.execPath, ['fastify.mjs'])).toMatchObject({ status: 0, stdout: 'function\n' });
  });

  it(`works from CommonJS (require of an ES module: Node ${pkg.engines.node})`, () => {
    writeFileSync(join(consumer, 'cjs.cjs'), `const { RateLimiter, perMinute } = require('sluice');\n${USE}\n`);
    expect(run(consumer, process.execPath, ['cjs.cjs'])).toMatchObject({ status: 0, stdout: '[true,true,false]\n' });
  });

  it('installs the sluice command', () => {
    const bin = join(consumer, 'node_modules', '.bin', 'sluice');
    expect(run(consumer, bin, ['--version'])).toEqual({ status: 0, stdout: `${pkg.version}\n`, stderr: '' });
  });

  it('type-checks from a CommonJS and from an ES module TypeScript project (module "nodenext")', () => {
    const projects = ['commonjs', 'module'].map((type) => {
      const project = join(dir, `ts-${type}`);
      mkdirSync(project);
      // Its node_modules: the installed package and, as in any Node project in TypeScript, @types/node.
      mkdirSync(join(project, 'node_modules', '@types'), { recursive: true });
      symlinkSync(join(consumer, 'node_modules', 'sluice'), join(project, 'node_modules', 'sluice'), 'dir');
      symlinkSync(join(root, 'node_modules', '@types', 'node'), join(project, 'node_modules', '@types', 'node'), 'dir');
      writeFileSync(join(project, 'package.json'), JSON.stringify({ name: `ts-${type}`, private: true, type }));
      // No skipLibCheck: the package's own declarations are checked too.
      writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, noEmit: true, types: ['node'] }, files: ['index.ts'] }));
      writeFileSync(join(project, 'index.ts'), `import { RateLimiter, perSecond, type Decision } from 'sluice';
const limiter = new RateLimiter({ limit: perSecond(2), maxKeys: 4 });
const d: Decision = limiter.tryAcquire('k');
const allowed: boolean = d.allowed;
// @ts-expect-error: a misspelt option is a type error
new RateLimiter({ limit: perSecond(2), maxKey: 4 });
export { allowed };
`);
      return project;
    });
    // The compiler in this process, one program per project on one host that parses each file
    // once (the standard library, @types/node and the package's declarations are the same files
    // in both). Checked: each project's index.ts and every declaration file of the package, as a
    // project without skipLibCheck checks them; not @types/node's own declarations.
    const options: ts.CompilerOptions = {
      module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022,
      strict: true, noEmit: true, types: ['node'],
    };
    const host = ts.createCompilerHost(options);
    const parsed = new Map<string, ts.SourceFile | undefined>();
    const { getSourceFile } = host;
    host.getSourceFile = (p, lang, onError, create) => {
      const key = `${p}\0${typeof lang === 'object' ? String(lang.impliedNodeFormat) : ''}`;
      if (!parsed.has(key)) parsed.set(key, getSourceFile.call(host, p, lang, onError, create));
      return parsed.get(key);
    };
    const installed = realpathSync(join(consumer, 'node_modules', 'sluice'));
    for (const project of projects) {
      const program = ts.createProgram([join(project, 'index.ts')], options, host);
      const own = program.getSourceFiles().filter((sf) => sf.fileName.startsWith(`${installed}/`));
      expect(own.map((sf) => sf.fileName)).toContain(join(installed, 'dist', 'index.d.ts'));
      const checked = [program.getSourceFile(join(project, 'index.ts')) as ts.SourceFile, ...own];
      const diagnostics = [
        ...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics(),
        ...checked.flatMap((sf) => [...program.getSyntacticDiagnostics(sf), ...program.getSemanticDiagnostics(sf)]),
      ];
      expect(diagnostics.map((d) => `${d.file?.fileName ?? project}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`)).toEqual([]);
    }
  });
});
