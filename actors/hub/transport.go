package hub

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
)

// providerIdleConns is how many idle connections to each provider are kept
// for the next model calls. Go's default keeps 2: with many chats calling
// one provider at once nearly every call dialled (and shook TLS hands)
// again.
const providerIdleConns = 256

// ProviderTransport is the transport of every provider's model calls
// unless Options.HTTPClient gives another: Go's default, keeping more idle
// connections, its plain TCP connections copying request bodies through a
// pooled buffer (copyConn).
func ProviderTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = providerIdleConns
	tr.MaxIdleConns = 4 * providerIdleConns
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newCopyConn(c), nil
	}
	return tr
}

// copyBufs are the buffers copyConn copies request bodies through; each is
// held by one ReadFrom call alone, for its length.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyConn is a connection whose ReadFrom copies through a pooled buffer.
// net/http writes a request body of known length (every model call's) with
// io.Copy onto the connection once the headers are flushed, and a TCP
// connection's own ReadFrom, finding nothing to splice, then allocates a
// buffer of up to 32 KB for each request (golang/go#76323): a sixth of
// the bytes a turn allocated at 10,000 chats. Over TLS the connection
// under tls.Conn is written with Write alone, so this changes nothing
// there.
type copyConn struct {
	net.Conn
	// plain is the connection with its ReadFrom hidden, so CopyBuffer
	// uses the buffer; a field, so passing it boxes nothing.
	plain struct{ io.Writer }
}

func newCopyConn(c net.Conn) *copyConn { return &copyConn{Conn: c, plain: struct{ io.Writer }{c}} }

func (c *copyConn) ReadFrom(r io.Reader) (int64, error) {
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	return io.CopyBuffer(&c.plain, r, *buf)
}
