// The table layouts as options (src/table/table-options.ts, LAYOUT_OPTION): tests of where one
// layout puts keys, or of how many slots it has, name it; every other test runs on the process's
// default (SLUICE_TABLE_LAYOUT, docs/testing.md).
import { LAYOUT_OPTION } from '../../src/table/table-options.js';

/** Pins a table to the HASHED layout (a key's slot is in its probe chain). */
export const HASHED_LAYOUT: { readonly [LAYOUT_OPTION]: 'hashed' } = { [LAYOUT_OPTION]: 'hashed' };
/** Pins a table to the SLAB layout (slots in arrival order behind a directory). */
export const SLAB_LAYOUT: { readonly [LAYOUT_OPTION]: 'slab' } = { [LAYOUT_OPTION]: 'slab' };
