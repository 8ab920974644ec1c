package proxy

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// limitListener serves at most n connections at once: a semaphore taken
// at Accept and given back when the connection closes. A connection past
// the bound is answered 503 with a problem document and closed, so the
// client learns why rather than waiting in the kernel's backlog.
type limitListener struct {
	net.Listener
	sem chan struct{}
}

func newLimitListener(ln net.Listener, n int) net.Listener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, n)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.sem <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
		default:
			go refuseConn(c, cap(l.sem))
		}
	}
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// refuseConn answers one connection past the bound and closes it: it
// reads the request's head (a response sent before the request is one a
// client may drop as unsolicited), answers, then half closes and drains
// briefly what the client sent, so that closing does not reset the
// connection before the client reads the answer.
func refuseConn(c net.Conn, n int) {
	defer c.Close()
	body := `{"type":"` + ProblemBase + `too-many-connections","title":"Too many connections","status":503,` +
		`"detail":"this proxy serves at most ` + strconv.Itoa(n) + ` connections at once (quotactl proxy --max-conns): retry shortly"}` + "\n"
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	br := bufio.NewReaderSize(io.LimitReader(c, 1<<16), 4096)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			return // no request head in time: nothing to answer
		}
		if len(line) <= 2 && err == nil && strings.TrimSpace(string(line)) == "" {
			break
		}
	}
	_, err := io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: "+
		strconv.Itoa(len(body))+"\r\n\r\n"+body)
	if err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<16))
}
