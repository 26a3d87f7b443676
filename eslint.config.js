// `npm run lint`: ESLint's and typescript-eslint's recommended rules over the sources, tests,
// benchmarks and examples. The type checker (tsc, strict, noUnused*) runs separately.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: { ...globals.node } },
  },
  {
    // A parameter kept for an interface's sake is named with a leading underscore.
    rules: { '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }] },
  },
  {
    // Lines under src/ are at most 160 characters, comments included; only a URL may run longer.
    files: ['src/**/*.ts'],
    rules: { 'max-len': ['error', { code: 160, ignoreUrls: true }] },
  },
);
