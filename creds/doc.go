// Package creds owns kiln's key material: the RSA signing key pair of a
// cluster, the tenant tokens (RS256 JWTs) signed with it, the on-disk token
// directory that holds both (DESIGN.md §6), and the OS-keyring entry that
// remembers where that directory lives.
//
// Two rules shape everything here:
//
//   - A token directory is one unit. It is written all at once into a
//     sibling temp directory and swapped in by rename, so a crash at any
//     instant leaves either the old complete directory or the new one
//     (see Write and Load).
//   - No error, log line or keyring value ever contains a token or key
//     material. Errors name files, fields and key ids, never contents.
package creds
