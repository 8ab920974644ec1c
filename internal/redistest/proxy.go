package redistest

import (
	"errors"
	"fmt"
	"net"
	"sync"
)

// proxy forwards loopback TCP connections to a target (an in-process
// miniredis) and can play the faults a redis-server process has: killed
// (listener and connections closed), restarted (listening again on the same
// port) and paused (connections stay open, nothing is forwarded).
type proxy struct {
	target string

	mu     sync.Mutex
	cond   *sync.Cond
	ln     net.Listener // nil while killed
	conns  map[net.Conn]struct{}
	paused bool
	gen    int // bumped by kill: pipes of an older generation stop
	wg     sync.WaitGroup
}

func newProxy(target string) *proxy {
	p := &proxy{target: target, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// listen starts accepting on addr ("127.0.0.1:0" for a free port).
func (p *proxy) listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	if p.ln != nil {
		p.mu.Unlock()
		_ = ln.Close()
		return errors.New("proxy already listening")
	}
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go p.accept(ln)
	return nil
}

func (p *proxy) port() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ln.Addr().(*net.TCPAddr).Port
}

func (p *proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.ln != ln { // killed between Accept and here
			p.mu.Unlock()
			_ = c.Close()
			return
		}
		p.conns[c] = struct{}{}
		gen := p.gen
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c, gen)
	}
}

// serve connects c to the target and copies both ways until either side
// closes or the proxy is killed.
func (p *proxy) serve(c net.Conn, gen int) {
	defer p.wg.Done()
	b, err := net.Dial("tcp", p.target)
	if err != nil {
		p.drop(c)
		return
	}
	p.mu.Lock()
	if p.gen != gen {
		p.mu.Unlock()
		_ = b.Close()
		_ = c.Close()
		return
	}
	p.conns[b] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		p.pipe(b, c, gen)
		close(done)
	}()
	p.pipe(c, b, gen)
	<-done
}

// pipe copies src to dst, holding every chunk while the proxy is paused,
// and closes both when either ends.
func (p *proxy) pipe(dst, src net.Conn, gen int) {
	defer p.drop(dst)
	defer p.drop(src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate(gen) {
				return
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

// gate blocks while the proxy is paused and reports whether the pipe may
// go on (false once the proxy was killed).
func (p *proxy) gate(gen int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.paused && p.gen == gen {
		p.cond.Wait()
	}
	return p.gen == gen
}

func (p *proxy) drop(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// kill closes the listener and every connection, as a crashed server's
// kernel would, and waits for the proxy's goroutines to end.
func (p *proxy) kill() {
	p.mu.Lock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	p.gen++
	p.paused = false
	for c := range p.conns {
		_ = c.Close()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *proxy) setPaused(paused bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return fmt.Errorf("the server is killed")
	}
	p.paused = paused
	p.cond.Broadcast()
	return nil
}
