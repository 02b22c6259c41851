// Package netproxy is the HTTP proxy that is a confined session's only way
// to the network. `aerfs run` gives each session a network namespace of its
// own with only loopback, opens the proxy's listening socket inside it and
// hands the descriptor to the daemon, which serves it here and dials out
// from the host's namespace. Every connection accepted on a listener belongs
// to the session that listener was made for: nothing here looks at pids.
//
// # What it speaks
//
// HTTP/1.1 in proxy form, as HTTP_PROXY, HTTPS_PROXY and ALL_PROXY clients
// send it: CONNECT host:port (a tunnel: TLS, or anything else the client
// speaks through it) and plain HTTP requests with an absolute http:// URL
// (forwarded one request per upstream connection, streaming, with 101
// upgrades relayed as tunnels). A forward listener (ServeForward) relays
// every connection to one fixed target: the session's model endpoint on the
// host's loopback, so that a client that never proxies loopback addresses
// still reaches its model. Nothing else: no SOCKS, no FTP, no proxying of
// https:// URLs in plain requests.
//
// # Invariants
//
//   - Every connection the session asks for is decided (Session.Decide)
//     before anything is dialled, and ends in exactly one Session.Done, a
//     refusal included.
//   - When the decision says the host's bytes taint the session,
//     Session.Taint returns before the first byte the host sent is written
//     to the session: a client never sees web content its session is not
//     already tainted by.
//   - A refusal answers 403 with the rule in the status line, an
//     X-Aerfs-Rule header and a one-line "aerfs: …" body; a request the
//     proxy cannot read answers 400 and says what it expects.
//
// # Threats answered
//
// A session's programs control every byte they send, the host names they
// ask for included: a host is parsed and normalised (policy.NormalHost)
// before it is decided, so no spelling of a name or an address reaches
// the dialler undecided. The proxy never interprets the content it relays.
package netproxy
