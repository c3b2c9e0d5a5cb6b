package pgtest

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a server, which a test
// cuts off to play the network's faults: Partition holds every
// connection open and passes nothing (a cable pulled, a firewall that
// drops packets: nobody hears a reset), Down closes them and refuses new
// ones (the server gone), Heal ends either.
type Proxy struct {
	t      testing.TB
	target string
	ln     net.Listener

	mu    sync.Mutex
	state proxyState
	conns map[net.Conn]struct{}
	// healed is closed when a partition ends.
	healed chan struct{}
}

type proxyState int

const (
	proxyUp proxyState = iota
	proxyPartitioned
	proxyDown
)

// NewProxy starts a proxy to the server of rawURL and returns it and
// rawURL pointed at it. It stops with the test.
func NewProxy(t testing.TB, rawURL string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{t: t, target: u.Host, ln: ln, conns: map[net.Conn]struct{}{}, healed: make(chan struct{})}
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.Heal()
		p.closeAll()
	})
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.state == proxyDown
		if !down {
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		if down {
			c.Close() // refused, as a closed port would
			continue
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		p.drop(client)
		return
	}
	p.mu.Lock()
	p.conns[server] = struct{}{}
	p.mu.Unlock()
	go p.pipe(server, client)
	p.pipe(client, server)
}

// pipe copies from src to dst, holding each chunk while the proxy is
// partitioned.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.drop(dst)
	defer p.drop(src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			state, healed := p.state, p.healed
			p.mu.Unlock()
			if state == proxyPartitioned {
				<-healed
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) closeAll() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// Partition passes nothing from now on, on connections open or new,
// and closes none, until Heal.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == proxyUp {
		p.healed = make(chan struct{})
	}
	p.state = proxyPartitioned
}

// Down closes every connection and refuses new ones until Heal.
func (p *Proxy) Down() {
	p.mu.Lock()
	if p.state == proxyPartitioned {
		close(p.healed)
	}
	p.state = proxyDown
	p.mu.Unlock()
	p.closeAll()
}

// Heal ends a partition (what was held goes through) or an outage.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == proxyPartitioned {
		close(p.healed)
	}
	p.state = proxyUp
}
