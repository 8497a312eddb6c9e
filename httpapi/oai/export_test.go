package oai

// KindPause is the tenant record kind of the pause index, for tests that
// look at the store.
const KindPause = kindPause
