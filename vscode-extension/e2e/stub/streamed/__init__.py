"""A stand-in for the real `streamed` package, used only by the extension's end-to-end tests
(STREAMED_E2E_SERVER=stub) while the real language server is not there yet. It implements the server contract
crudely: kinds by token digest, divergences between same-named kinds, code lenses, the four commands."""
