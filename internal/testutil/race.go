//go:build race

package testutil

// Race says whether the tests run under the race detector, which makes a
// handshake five to ten times slower: a test that fills a server's pool
// with a thousand attackers fills a smaller pool there, the same way.
const Race = true
