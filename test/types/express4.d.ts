// `express4` is Express 4 installed under an alias (package.json), to test against both majors:
// typed as Express, whose API the tests use identically in both.
declare module 'express4' {
  import express from 'express';
  export default express;
}
