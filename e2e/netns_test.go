//go:build e2e

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A page host outside the host's own addresses, for clients that refuse
// to fetch from private and local hosts (Gemini CLI's web_fetch passes
// only what ipaddr.js classes "unicast": no loopback, RFC 1918, CGNAT,
// link-local, TEST-NET or benchmark address).
//
// The test makes a network namespace of its own and a veth pair between
// it and the host's namespace, where the aerfs daemon's proxy runs. The
// page address lives only inside that namespace and the host reaches it
// only by the /30 route the test adds over its veth, more specific than
// any other route: no packet to or from it can leave the machine. The
// namespace has no other interface and no default route. Everything is
// removed on every exit path (t.Cleanup), and the removal is checked.
const (
	pageNet     = "198.20.0.0/30" // unicast for ipaddr.js, just above 198.18.0.0/15
	pageHostEnd = "198.20.0.1"    // the host's end of the veth pair
	pageAddr    = "198.20.0.2"    // the namespace's end: the page's address
	pageLock    = "/run/aerfs-e2e-pagens.lock"
)

// pageNS is a network namespace holding pageAddr.
type pageNS struct {
	name     string // ip netns name
	hostLink string // the veth end in the host's namespace
	nsLink   string // the veth end in the namespace
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func ipOut(args ...string) string {
	out, _ := exec.Command("ip", args...).CombinedOutput()
	return string(out)
}

// newPageNS makes the namespace, the veth pair and the route; it fails
// the test (never skips) when it cannot.
func newPageNS(t *testing.T) *pageNS {
	t.Helper()
	lockPageNet(t)
	b := make([]byte, 4)
	rand.Read(b)
	id := hex.EncodeToString(b)
	ns := &pageNS{name: "aerfs-page-" + id, hostLink: "apgh" + id, nsLink: "apgn" + id}
	removeStale(t)
	if out := strings.TrimSpace(ipOut("-4", "route", "show", "to", "match", pageAddr) + ipOut("-4", "addr", "show", "to", pageNet)); strings.Contains(out, pageNet) || strings.Contains(out, pageHostEnd) {
		t.Fatalf("%s is already routed on this host (an earlier run left it?): %s", pageNet, out)
	}
	t.Cleanup(func() { ns.remove(t) })
	for _, args := range [][]string{
		{"netns", "add", ns.name},
		{"link", "add", ns.hostLink, "type", "veth", "peer", "name", ns.nsLink, "netns", ns.name},
		{"addr", "add", pageHostEnd + "/32", "dev", ns.hostLink},
		{"link", "set", ns.hostLink, "up"},
		{"-n", ns.name, "addr", "add", pageAddr + "/30", "dev", ns.nsLink},
		{"-n", ns.name, "link", "set", ns.nsLink, "up"},
		{"-n", ns.name, "link", "set", "lo", "up"},
		{"route", "add", pageNet, "dev", ns.hostLink, "src", pageHostEnd},
	} {
		if err := ipCmd(args...); err != nil {
			t.Fatalf("page namespace: %v", err)
		}
	}
	// Before any traffic: the host's way to the page is the veth.
	if got := ipOut("-4", "route", "get", pageAddr); !strings.Contains(got, "dev "+ns.hostLink+" ") {
		t.Fatalf("page namespace: %s is not routed over %s: %s", pageAddr, ns.hostLink, got)
	}
	return ns
}

// lockPageNet keeps pageNet to one test process at a time (several
// e2e runs may share the machine), waiting at most three minutes.
func lockPageNet(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(pageLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if err != unix.EWOULDBLOCK || i == 1800 {
			f.Close()
			t.Fatalf("page namespace: lock %s: %v", pageLock, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() { f.Close() }) // after ns.remove: cleanups run last-in first-out
}

// removeStale removes what a run killed before its clean-up left behind:
// namespaces and veth ends of this file's naming. The lock is held, so
// no other run is using them.
func removeStale(t *testing.T) {
	for _, f := range strings.Fields(ipOut("netns", "list")) {
		if strings.HasPrefix(f, "aerfs-page-") {
			t.Logf("removing network namespace %s left by an earlier run", f)
			exec.Command("ip", "netns", "del", f).Run()
		}
	}
	for _, line := range strings.Split(ipOut("-o", "link", "show"), "\n") {
		// "7: apgh0123abcd@if6: <...>"
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if strings.HasPrefix(name, "apgh") || strings.HasPrefix(name, "apgn") {
			t.Logf("removing veth %s left by an earlier run", name)
			exec.Command("ip", "link", "del", name).Run()
		}
	}
}

// remove deletes the route, the veth pair and the namespace, and reports
// any of them left behind.
func (ns *pageNS) remove(t *testing.T) {
	exec.Command("ip", "route", "del", pageNet, "dev", ns.hostLink).Run()
	exec.Command("ip", "link", "del", ns.hostLink).Run() // its peer goes with it
	exec.Command("ip", "netns", "del", ns.name).Run()
	if out := ipOut("netns", "list"); strings.Contains(out, ns.name) {
		t.Errorf("page namespace %s left behind: %s", ns.name, out)
	}
	if out := ipOut("-o", "link", "show"); strings.Contains(out, ns.hostLink) || strings.Contains(out, ns.nsLink) {
		t.Errorf("veth %s left behind: %s", ns.hostLink, out)
	}
	if out := ipOut("-4", "route", "show"); strings.Contains(out, pageNet) || strings.Contains(out, ns.hostLink) {
		t.Errorf("route to %s left behind: %s", pageNet, out)
	}
}

// listen opens a TCP listener on pageAddr inside the namespace. The socket
// is made by a thread that entered the namespace; the thread stays locked
// to its goroutine and ends with it, so no other goroutine runs in the
// namespace. The socket keeps its namespace wherever it is served from.
func (ns *pageNS) listen() (net.Listener, error) {
	type res struct {
		l   net.Listener
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		f, err := os.Open("/run/netns/" + ns.name)
		if err != nil {
			ch <- res{nil, err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), syscall.CLONE_NEWNET); err != nil {
			ch <- res{nil, fmt.Errorf("setns %s: %w", ns.name, err)}
			return
		}
		l, err := net.Listen("tcp", net.JoinHostPort(pageAddr, "0"))
		ch <- res{l, err}
	}()
	r := <-ch
	return r.l, r.err
}

// selfSigned is a certificate of its own authority for the address ip.
func selfSigned(t *testing.T, ip string) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: ip},
		IPAddresses:           []net.IP{net.ParseIP(ip)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
