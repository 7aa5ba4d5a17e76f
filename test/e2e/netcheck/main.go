// Command netcheck tells, from inside a pod, which connections the network
// lets through; the e2e suite runs it with `kubectl exec`-style exec in
// server pods (its image also holds the everything-server) and as the
// listeners those connections aim at.
//
//	netcheck dial ADDR...            one line per ADDR: connected | refused | timeout | error: ...
//	netcheck lookup SERVER NAME      answer: IP,... | timeout | error: ...
//	netcheck serve [-tcp ADDR,...] [-dns ADDR -answer IP]
//
// A dropped connection (what NetworkPolicy enforcement does) times out; a
// refused one reached its host, so the two are told apart.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// timeout is how long a connection or lookup may take before it counts as
// dropped: long enough for a loaded node, short next to TCP's own retries.
const timeout = 3 * time.Second

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "dial":
		dialAll(os.Args[2:])
	case "lookup":
		if len(os.Args) != 4 {
			usage()
		}
		fmt.Println(lookup(os.Args[2], os.Args[3]))
	case "serve":
		if err := serve(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "netcheck:", err)
			os.Exit(1)
		}
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: netcheck dial ADDR... | lookup SERVER NAME | serve [-tcp ADDR,...] [-dns ADDR -answer IP]")
	os.Exit(2)
}

// dialAll dials every address at once and prints one line per address, in
// the order given.
func dialAll(addrs []string) {
	out := make([]string, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() { out[i] = a + " " + dial(a) })
	}
	wg.Wait()
	fmt.Println(strings.Join(out, "\n"))
}

func dial(addr string) string {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	switch {
	case err == nil:
		conn.Close()
		return "connected"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case os.IsTimeout(err):
		return "timeout"
	default:
		return "error: " + err.Error()
	}
}

// lookup asks one DNS server (UDP port 53) for NAME's A records.
func lookup(server, name string) string {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", net.JoinHostPort(server, "53"))
	}}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ips, err := r.LookupHost(ctx, name)
	var dnsErr *net.DNSError
	switch {
	case err == nil:
		return "answer: " + strings.Join(ips, ",")
	case errors.As(err, &dnsErr) && dnsErr.IsTimeout, errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	default:
		return "error: " + err.Error()
	}
}

// serve runs TCP listeners that greet and close, and a DNS server that
// answers every A question with one address, until SIGTERM or SIGINT.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	tcp := fs.String("tcp", "", "comma-separated addresses to accept TCP connections on")
	dns := fs.String("dns", "", "address to answer DNS questions on (UDP)")
	answer := fs.String("answer", "", "the IPv4 address every A question gets")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, a := range strings.Split(*tcp, ",") {
		if a == "" {
			continue
		}
		l, err := net.Listen("tcp", a)
		if err != nil {
			return err
		}
		go accept(l)
	}
	if *dns != "" {
		ip, err := netipv4(*answer)
		if err != nil {
			return err
		}
		pc, err := net.ListenPacket("udp", *dns)
		if err != nil {
			return err
		}
		go answerDNS(pc, ip)
	}
	fmt.Println("serving")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	return nil
}

func accept(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		_, _ = io.WriteString(c, "netcheck\n")
		c.Close()
	}
}

func netipv4(s string) ([4]byte, error) {
	ip := net.ParseIP(s).To4()
	if ip == nil {
		return [4]byte{}, fmt.Errorf("-answer %q is not an IPv4 address", s)
	}
	return [4]byte(ip), nil
}

func answerDNS(pc net.PacketConn, ip [4]byte) {
	buf := make([]byte, 512)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		var q dnsmessage.Message
		if q.Unpack(buf[:n]) != nil || len(q.Questions) == 0 {
			continue
		}
		reply := dnsmessage.Message{
			Header:    dnsmessage.Header{ID: q.ID, Response: true, Authoritative: true},
			Questions: q.Questions,
		}
		question := q.Questions[0]
		if question.Type == dnsmessage.TypeA {
			reply.Answers = []dnsmessage.Resource{{
				Header: dnsmessage.ResourceHeader{Name: question.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 5},
				Body:   &dnsmessage.AResource{A: ip},
			}}
		}
		if out, err := reply.Pack(); err == nil {
			_, _ = pc.WriteTo(out, from)
		}
	}
}
