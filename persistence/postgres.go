package persistence

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/fairshare"
)

// Postgres is the store on PostgreSQL, holding what Store holds on Badger
// (migrations/0001_store.sql) with the same behaviour: every update goes
// through the same group committer, one transaction per batch, so a write
// returns once Postgres has committed it (synchronous_commit on, set for
// agentd's sessions: its WAL is flushed) and the caller may acknowledge it. Safe for
// concurrent use.
type Postgres struct {
	pool pgPool // the readers' connections
	// reads share pool's connections between tenants (see read): one
	// tenant's many or slow reads (an export, many chats woken at once)
	// held every connection, and every other tenant's reads waited.
	reads *fairshare.Slots
	// lanes caches each chat's tenant, to know whose read a chat's is: a
	// chat's tenant never changes, and an entry another node's deletion
	// left behind only names the lane of a read that finds nothing.
	lanes *tenants
	// writer is the committer's one connection, apart from the readers':
	// every tenant's writes wait on the committer, and with its batches
	// taking connections from pool, one tenant's slow or many reads
	// holding all of them stalled every tenant's writes while they went on.
	// A failed write's re-read of its chat's epoch (recheckEpoch) runs on
	// it too, outside the readers' share: on pool's, it waited while
	// tenants' reads held every connection, or took the one they leave
	// another tenant.
	writer pgTxns
	w      *committer[*pgTxn]
	// life ends when Close ends the store (its cause says why): every
	// batch, ping and question to the server is bounded by it.
	life context.Context
	end  context.CancelCauseFunc
	// conns are the pools' connections, cut when Close gives up.
	conns *liveConns

	mu sync.Mutex
	// epochs are the owner epochs this store claimed, by chat (Claim).
	epochs map[string]int64
	// unreached is the last failed batch whose chats' epochs could not be
	// read again (movedOr): its other writes do not ask again.
	unreached *batchError

	// reach guards outSince: since when the pings of watchReach have
	// failed (zero while the server answers).
	reach    sync.Mutex
	outSince time.Time
	// pings runs watchReach until stopPings; Close stops it first. It
	// pings on ppool's one connection of its own: on pool's, a ping
	// waited for a connection while tenants' slow reads held every one,
	// and a busy server was reported out of reach.
	pings     sync.WaitGroup
	stopPings context.CancelFunc
	ppool     pgPool
}

// reachEvery is how often the store pings the server (PostgresOptions.
// PingEvery's default): /healthz reads the outcome, so what it says is at
// most a ping old, however seldom it is asked, for one ping a second.
const reachEvery = time.Second

// reachTimeout bounds one ping.
const reachTimeout = 5 * time.Second

// Unreached reports since when the server has not answered the store's
// pings (zero while it answers). It does not wait for a ping: a server
// that swallows packets would hold /healthz past a probe's timeout, and
// the probe would count a moment's outage as the node's failure. A restart
// of Postgres shows for its seconds and clears at the first ping after;
// the caller decides how long is too long.
func (p *Postgres) Unreached() time.Time {
	p.reach.Lock()
	defer p.reach.Unlock()
	return p.outSince
}

// watchReach pings the server every every, one ping at a time, until
// ctx ends, and keeps Unreached current: a ping made only when /healthz
// asked left the answer of the last one asked, so the first probe after a
// quiet spell reported an outage long over (failing, past the hub's
// store.failing_after).
func (p *Postgres) watchReach(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		began := time.Now()
		pctx, cancel := context.WithTimeout(ctx, reachTimeout)
		err := p.ppool.with(pctx, func(c *pgxpool.Conn) error { return c.Ping(pctx) })
		cancel()
		if ctx.Err() != nil {
			return
		}
		p.reach.Lock()
		switch {
		case err == nil:
			p.outSince = time.Time{}
		case p.outSince.IsZero():
			p.outSince = began
		}
		p.reach.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// PostgresOptions tune OpenPostgres.
type PostgresOptions struct {
	// BatchTimeout bounds one batch's transaction, so a server that stops
	// answering fails the writes instead of holding them forever. 0: a
	// minute.
	BatchTimeout time.Duration
	// ObserveDurable is Options.ObserveDurable: here a batch's COMMIT,
	// which is its sync.
	ObserveDurable func(time.Duration)
	// PingEvery is how often the store pings the server for Unreached.
	// 0: a second.
	PingEvery time.Duration

	// idlePing stands in for the ping of a connection idle before use
	// (nil: pgx's), and idleFor for how long idle it is pinged after (0:
	// idleBeforePing): tests watch the ping, on a connection idle as
	// long as they say.
	idlePing func(*pgx.Conn, context.Context) error
	idleFor  time.Duration
}

// idleBeforePing is how long a connection idles before its next use pings
// it (pingIdle), as pgx's default does.
const idleBeforePing = time.Second

// idleInTxTimeout is how long the server lets a transaction of agentd's
// wait on it idle; a batch's statements follow each other at once.
const idleInTxTimeout = "30s"

// connectTimeout bounds the first connection when the DSN sets none.
const connectTimeout = 10 * time.Second

// OpenPostgres connects to the database dsn names, applies the migrations
// it has not seen, and returns the store; applied names those it applied.
func OpenPostgres(ctx context.Context, dsn string, o PostgresOptions) (st *Postgres, applied []string, err error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's error repeats the DSN with its password masked.
		return nil, nil, fmt.Errorf("postgres DSN: %w", err)
	}
	// The durability promise: a commit returns once its WAL is flushed,
	// whatever the server's default; a DSN may ask for more (remote_apply).
	if _, set := cfg.ConnConfig.RuntimeParams["synchronous_commit"]; !set {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	}
	// A node paused (SIGSTOP, a VM frozen) inside a batch would hold its
	// chats' owner rows (fence) and keep another node's Claim waiting as
	// long as its connection lives; the server ends such a transaction
	// instead, and the paused node's commit fails when it wakes.
	if _, set := cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !set {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = idleInTxTimeout
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	life, end := context.WithCancelCause(context.Background())
	conns := &liveConns{life: life, conns: map[*liveConn]struct{}{}}
	cfg.ConnConfig.DialFunc = conns.dial(cfg.ConnConfig.DialFunc)
	cfg.ShouldPing = pingIdle(cmp.Or(o.idleFor, idleBeforePing), o.idlePing)
	defer func() {
		if err != nil {
			end(err)
		}
	}()
	// Reads of many chats at once; the writer holds one connection. A DSN's
	// own pool_max_conns wins.
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, 16)
	}
	where := fmt.Sprintf("postgres at %s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	pool, err := newPgPool(ctx, cfg, conns)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", where, err)
	}
	conn, err := pool.acquire(ctx)
	if err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("connect to %s: %w", where, err)
	}
	ms, err := loadMigrations(migrations)
	if err == nil {
		applied, err = migrate(ctx, conn.Conn(), ms)
	}
	pool.release(conn)
	if err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("migrate %s: %w", where, err)
	}
	if o.BatchTimeout <= 0 {
		o.BatchTimeout = time.Minute
	}
	wcfg := cfg.Copy()
	// The committer runs one batch at a time, on one connection; one cut
	// gives its place to a new one at once (see pgPool.release).
	wcfg.MaxConns, wcfg.MinConns = 1, 0
	wpool, err := newPgPool(ctx, wcfg, conns)
	if err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("open %s for the writer: %w", where, err)
	}
	pcfg := cfg.Copy()
	// One ping at a time, on one connection, replaced at once when cut
	// (see pgPool.release).
	pcfg.MaxConns, pcfg.MinConns = 1, 0
	ppool, err := newPgPool(ctx, pcfg, conns)
	if err != nil {
		pool.Close()
		wpool.Close()
		return nil, nil, fmt.Errorf("open %s for its pings: %w", where, err)
	}
	size := int(cfg.MaxConns)
	writer := pgTxns{pool: wpool, timeout: o.BatchTimeout, life: life}
	p := &Postgres{pool: pool, reads: fairshare.NewSlots(size, size-1), lanes: newTenants(),
		writer: writer, ppool: ppool, w: newCommitter(writer, o.ObserveDurable),
		life: life, end: end, conns: conns, epochs: map[string]int64{}}
	pctx, stop := context.WithCancel(life)
	p.stopPings = stop
	if o.PingEvery <= 0 {
		o.PingEvery = reachEvery
	}
	p.pings.Go(func() { p.watchReach(pctx, o.PingEvery) })
	return p, applied, nil
}

// Close is CloseContext without a bound: it waits for every write
// submitted, however long the server takes to answer.
func (p *Postgres) Close() error { return p.CloseContext(context.Background()) }

// errGaveUp is the cause of the writes a bounded Close fails.
var errGaveUp = fmt.Errorf("%w before the write was committed", ErrClosed)

// CloseContext commits the writes already submitted, then closes the
// connections; later writes fail with ErrClosed. When ctx ends first (a
// server that stopped answering holds a batch for its BatchTimeout, and
// each connection's close for pgx's 15 s), it cuts the connections: the writes
// not yet committed fail, their callers told (errors.Is ErrClosed for
// those not begun), and the error says how many it gave up. A write
// acknowledged before was committed, so nothing durable is lost.
func (p *Postgres) CloseContext(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.stopPings()
		p.pings.Wait()
		p.ppool.Close()
		p.w.close()
		p.writer.pool.Close()
		p.pool.Close()
		p.conns.closing.Wait()
	}()
	select {
	case <-done:
		p.end(ErrClosed)
		return nil
	case <-ctx.Done():
	}
	n := p.w.unfinished.Load()
	p.end(errGaveUp)
	p.conns.cut()
	<-done
	writes := fmt.Sprintf("%d writes", n)
	if n == 1 {
		writes = "1 write"
	}
	return fmt.Errorf("close postgres: gave up on the %s still pending (their callers were told they failed) and cut its connections: %w", writes, ctx.Err())
}

// liveConns are a store's connections, so that a Close giving up can end
// their waits: pgx cancels a statement by dialing the server again, for
// up to 15 s, and a pool's Close waits for that, and for a read in flight
// under a context that never ends.
type liveConns struct {
	life  context.Context // ended: no more dials
	mu    sync.Mutex
	conns map[*liveConn]struct{}
	// closing are the dead connections' closes, off their pools (see
	// pgPool.release); Close waits for them, and a cut ends them.
	closing sync.WaitGroup
}

// liveConn is a connection that leaves its set when closed.
type liveConn struct {
	net.Conn
	set *liveConns
}

func (c *liveConn) Close() error {
	c.set.mu.Lock()
	delete(c.set.conns, c)
	c.set.mu.Unlock()
	return c.Conn.Close()
}

// dial wraps base so that its connections join s, and a dial ends with
// the store's life.
func (s *liveConns) dial(base pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		defer context.AfterFunc(s.life, func() { cancel(context.Cause(s.life)) })()
		c, err := base(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.life.Err() != nil {
			_ = c.Close()
			return nil, context.Cause(s.life)
		}
		lc := &liveConn{Conn: c, set: s}
		s.conns[lc] = struct{}{}
		return lc, nil
	}
}

// cut closes every connection, once life has ended (so no dial adds one).
func (s *liveConns) cut() {
	s.mu.Lock()
	conns := slices.Collect(maps.Keys(s.conns))
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// pgPool is one of the store's pools (the readers', the writer's, the
// pings'), whose dead connections give their place back at once: pgx
// keeps a dead one's place while it closes it, up to 15 s when the cancel
// request it sends first goes unanswered (a network blip, a partition on
// the way back), and a pool whose every connection was cut waited that
// long for one, the server back or not — every tenant's reads, or writes.
type pgPool struct {
	*pgxpool.Pool
	conns *liveConns
	size  int32
}

func newPgPool(ctx context.Context, cfg *pgxpool.Config, conns *liveConns) (pgPool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	return pgPool{Pool: pool, conns: conns, size: cfg.MaxConns}, err
}

// pingIdle is the pools' ShouldPing: it pings (with ping, nil: pgx's) a
// connection idle for longer than after before use, as pgx does, and
// hands it out whatever the answer, for acquire to close a dead one off
// the pool; pgx closed one whose ping failed in its place. The ping is
// bounded by reachTimeout, not by the caller: a ping its caller's cancel
// or deadline cut short leaves the connection closed (pgx cannot tell
// where its answer stopped), and a healthy connection was lost to each
// request that went away mid-ping.
func pingIdle(after time.Duration, ping func(*pgx.Conn, context.Context) error) func(context.Context, pgxpool.ShouldPingParams) bool {
	if ping == nil {
		ping = (*pgx.Conn).Ping
	}
	return func(ctx context.Context, c pgxpool.ShouldPingParams) bool {
		if c.IdleDuration > after {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reachTimeout)
			defer cancel()
			_ = ping(c.Conn, ctx)
		}
		return false
	}
}

// acquire takes a live connection, closing the dead ones it is given;
// release gives it back.
func (p pgPool) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	for range p.size + 1 {
		c, err := p.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		if !c.Conn().IsClosed() {
			return c, nil
		}
		p.release(c)
	}
	// Unavailable: a request that meets it is answered 503, to send again.
	return nil, fmt.Errorf("acquire a connection: every one given was closed: %w", pgconn.ErrConnClosed)
}

// release gives c back to the pool when it can be used again, or takes it
// out and closes it apart (pgx's close, bounded by its 15 s, the store's
// Close cutting it short): one cut, or left inside a statement or a
// transaction, is not.
func (p pgPool) release(c *pgxpool.Conn) {
	pc := c.Conn().PgConn()
	if !pc.IsClosed() && !pc.IsBusy() && pc.TxStatus() == 'I' {
		c.Release()
		return
	}
	// Counted before it leaves the pool, whose Close waits for it until
	// then: the store's Close, past the pools', waits for it too.
	p.conns.closing.Add(1)
	conn := c.Hijack()
	go func() {
		defer p.conns.closing.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
		select {
		case <-conn.PgConn().CleanupDone():
		case <-ctx.Done():
		}
	}()
}

// with runs fn on a connection of p's.
func (p pgPool) with(ctx context.Context, fn func(c *pgxpool.Conn) error) error {
	c, err := p.acquire(ctx)
	if err != nil {
		return err
	}
	defer p.release(c)
	return fn(c)
}

// pgTxn is one batch's transaction and the deadline its statements share.
type pgTxn struct {
	ctx    context.Context
	cancel context.CancelFunc
	conn   *pgxpool.Conn
	tx     pgx.Tx
}

// pgTxns are Postgres transactions, for the committer, one at a time: its
// pool has one connection, held from a transaction's begin until discard.
type pgTxns struct {
	pool    pgPool
	timeout time.Duration
	life    context.Context // the store's
}

// run runs fn in a transaction of its own, on the writer's connection.
func (p pgTxns) run(ctx context.Context, fn func(pgx.Tx) error) error {
	return p.pool.with(ctx, func(c *pgxpool.Conn) error { return pgx.BeginFunc(ctx, c, fn) })
}

func (p pgTxns) begin() (*pgTxn, error) {
	if p.life.Err() != nil {
		return nil, context.Cause(p.life)
	}
	ctx, cancel := context.WithTimeout(p.life, p.timeout)
	conn, err := p.pool.acquire(ctx)
	var tx pgx.Tx
	if err == nil {
		if tx, err = conn.Begin(ctx); err != nil {
			err, _ = lostOn(conn, err)
			p.pool.release(conn)
		}
	}
	if err != nil {
		cancel()
		if p.life.Err() != nil {
			err = fmt.Errorf("%w: %w", context.Cause(p.life), err)
		}
		return nil, err
	}
	return &pgTxn{ctx: ctx, cancel: cancel, conn: conn, tx: tx}, nil
}

// commit commits t; unless durable, it does not wait for the WAL flush
// (synchronous_commit off for this transaction alone): the WAL is flushed
// in order, so the next synchronous commit makes it durable too.
func (pgTxns) commit(t *pgTxn, durable bool) error {
	if !durable {
		if _, err := t.tx.Exec(t.ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			return err
		}
	}
	return t.tx.Commit(t.ctx)
}

// sync: a durable commit has flushed the WAL already.
func (pgTxns) sync() error { return nil }

// discard rolls back what was not committed (after a commit, nothing),
// and gives its connection back (or closes it).
func (p pgTxns) discard(t *pgTxn) {
	_ = t.tx.Rollback(t.ctx)
	p.pool.release(t.conn)
	t.cancel()
}

// failed says a write's or the commit's err in t Unavailable when t's
// connection was lost (lostOn). Such a write is not tried again: it may
// have landed (a commit whose answer the cut lost), so its caller is told
// to send it again, under its idempotency key where the API has one.
func (pgTxns) failed(t *pgTxn, err error) error {
	err, _ = lostOn(t.conn, err)
	return err
}

// tooBig: Postgres takes a batch of any size in one transaction.
func (pgTxns) tooBig(error) bool { return false }

func (p *Postgres) update(ctx context.Context, fn func(t *pgTxn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return p.w.do(fn)
}

// exec runs one statement as a write.
func (p *Postgres) exec(ctx context.Context, sql string, args ...any) error {
	return p.update(ctx, func(t *pgTxn) error {
		_, err := t.tx.Exec(t.ctx, sql, args...)
		return err
	})
}

// read runs fn, which reads through pool, once tenant holds one of the
// reading connections: a tenant holds at most all of them but one, so one
// tenant alone never holds them all, and a freed one goes to the waiting
// tenant holding fewest (fairshare.Share). A read that fails once the
// store is closed (its Close cut it, giving up on a server that does not
// answer) says so: errors.Is ErrClosed, not a connection's error.
//
// A read is idempotent, so one that failed only because its connection
// was dead runs again on another, as acquire takes them: at most one try a
// connection of the pool's, and a new one. After a network blip cut the
// pool's connections, those idle under a second are not pinged first
// (pingIdle), and each read given one failed, 503, until a live one came.
// fn starts its results afresh on each try.
func (p *Postgres) read(ctx context.Context, tenant string, fn func(c *pgxpool.Conn) error) error {
	return p.onReader(ctx, tenant, p.pool.size+1, fn)
}

// onReader runs fn as read does, in up to tries tries: Claim, a write on a
// reading connection, tries once.
func (p *Postgres) onReader(ctx context.Context, tenant string, tries int32, fn func(c *pgxpool.Conn) error) error {
	release, err := p.reads.Acquire(ctx, tenant)
	if err != nil {
		return err
	}
	defer release()
	for range tries {
		var lost bool
		err = p.pool.with(ctx, func(c *pgxpool.Conn) error {
			err, lost = lostOn(c, fn(c))
			return err
		})
		if !lost || ctx.Err() != nil || p.life.Err() != nil {
			break
		}
	}
	if err != nil && p.life.Err() != nil {
		err = fmt.Errorf("%w: %w", context.Cause(p.life), err)
	}
	return err
}

// lostOn is err, a statement's on c, said Unavailable when it is c's loss
// (lost): pgx returns a cut connection's end of stream bare
// (io.ErrUnexpectedEOF, or the network's error), which Unavailable cannot
// tell from another's (a provider's); said here, the request is a 503, to
// send again, not a 500. Every statement of the store's, a read's or a
// write's, is classed by it.
func lostOn(c *pgxpool.Conn, err error) (_ error, lost bool) {
	if err == nil || !c.Conn().IsClosed() || !lostConn(err) {
		return err, false
	}
	if !Unavailable(err) {
		err = fmt.Errorf("%w: %w", pgconn.ErrConnClosed, err)
	}
	return err, true
}

// lostConn reports whether err, a statement's on a connection pgx then
// closed, is that connection's loss: it never reached the server, or the
// network or the server ended the connection. Not a statement's failure,
// which another try would meet again, nor its deadline or its caller's
// cancel (context.DeadlineExceeded is a net.Error to errors.As). pgx
// returns a cut's end of stream bare; the connection closed says it was
// the store's.
func lostConn(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	_, netErr := errors.AsType[net.Error](err)
	return pgconn.SafeToRetry(err) || Unavailable(err) || netErr ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// readsForKey carries ReadsFor's tenant.
type readsForKey struct{}

// ReadsFor marks the reads made with ctx as tenant's: on Postgres they
// take a connection as tenant's (see Postgres.read), even of a chat this
// node has not seen yet or of another tenant's. Badger ignores it.
func ReadsFor(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, readsForKey{}, tenant)
}

// lane is the tenant whose read a read made with ctx of chat id ("" for
// none) is: ReadsFor's, else the chat's cached tenant, else "" (reads of
// no tenant's, records not marked with ReadsFor, and chats this node has
// not seen yet, which share a lane: they too leave a connection to every
// tenant).
func (p *Postgres) lane(ctx context.Context, id string) string {
	if tenant, ok := ctx.Value(readsForKey{}).(string); ok {
		return tenant
	}
	tenant, _, _ := p.lanes.get(id)
	return tenant
}

// seen caches the tenant of chats read or written.
func (p *Postgres) seen(cs ...Chat) {
	for _, c := range cs {
		_, ok, gen := p.lanes.get(c.ID)
		if !ok {
			p.lanes.put(c.ID, c.Tenant, gen)
		}
	}
}

// get reads the one envelope sql selects into v; ErrNotFound if none.
func (p *Postgres) get(ctx context.Context, tenant string, v any, sql string, args ...any) error {
	var b []byte
	err := p.read(ctx, tenant, func(c *pgxpool.Conn) error { return c.QueryRow(ctx, sql, args...).Scan(&b) })
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	return decode(b, v)
}

// holdable reports whether Postgres's text can hold s: UTF-8 without a
// NUL. Badger holds any bytes, and every id agentd makes is such text, so
// an id of other bytes (a request's path, %00 or %FF in it) names nothing
// stored: a read of it finds nothing, as on Badger, where the server would
// refuse the statement.
func holdable(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// Unavailable reports whether err is Postgres out of reach for a moment
// rather than a fault of the request or of agentd: a connection lost or
// refused, the server shutting down, starting or out of connections, a
// transaction it aborted to end a deadlock or a serialization conflict, a
// statement it cancelled past a statement_timeout or lock_timeout the DSN
// set.
// What failed so is worth sending again shortly; the pool replaces the
// dead connections.
func Unavailable(err error) bool {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", "53300", "40001", "40P01", "57014", "55P03":
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08") // connection exception
	}
	if _, connect := errors.AsType[*pgconn.ConnectError](err); connect || errors.Is(err, pgconn.ErrConnClosed) {
		return true
	}
	// A connection's read or write that failed: pgconn's own error (the
	// one kind that says whether a retry is safe) around the network's. A
	// network error of anything else (a provider, an MCP server) is not
	// the store's.
	var pg interface{ SafeToRetry() bool }
	_, netErr := errors.AsType[net.Error](err)
	return errors.As(err, &pg) && (netErr || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF))
}

// CreateChat stores a new chat; it fails if the id exists.
func (p *Postgres) CreateChat(ctx context.Context, c Chat) error {
	val, err := encode(c)
	if err != nil {
		return err
	}
	err = p.update(ctx, func(t *pgTxn) error {
		tag, err := t.tx.Exec(t.ctx, `INSERT INTO chats (id, tenant, data) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING`, c.ID, c.Tenant, val)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("create chat %s: already exists", c.ID)
		}
		return nil
	})
	if err == nil {
		p.seen(c)
	}
	return err
}

// UpdateChat overwrites a chat's metadata.
func (p *Postgres) UpdateChat(ctx context.Context, c Chat) error {
	val, err := encode(c)
	if err != nil {
		return err
	}
	return p.exec(ctx, `INSERT INTO chats (id, tenant, data) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET data = excluded.data`, c.ID, c.Tenant, val)
}

// ChatTenant reads only the tenant of a chat (see Store.ChatTenant).
func (p *Postgres) ChatTenant(ctx context.Context, id string) (string, error) {
	if !holdable(id) {
		return "", fmt.Errorf("chat %s: %w", id, ErrNotFound)
	}
	var tenant string
	err := p.read(ctx, p.lane(ctx, id), func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT tenant FROM chats WHERE id = $1`, id).Scan(&tenant)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("chat %s: %w", id, err)
	}
	p.seen(Chat{ID: id, Tenant: tenant})
	return tenant, nil
}

// Chat reads one chat's metadata.
func (p *Postgres) Chat(ctx context.Context, id string) (Chat, error) {
	if !holdable(id) {
		return Chat{}, fmt.Errorf("chat %s: %w", id, ErrNotFound)
	}
	out, err := p.chats(ctx, p.lane(ctx, id), `c.id = $1`, id)
	if err == nil && len(out) == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return Chat{}, fmt.Errorf("chat %s: %w", id, err)
	}
	return out[0], nil
}

// CountChats counts a tenant's chats from the tenant index.
func (p *Postgres) CountChats(ctx context.Context, tenant string) (int, error) {
	var n int
	err := p.read(ctx, tenant, func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT count(*) FROM chats WHERE tenant = $1`, tenant).Scan(&n)
	})
	return n, err
}

// Chats lists the chats of a tenant ("" lists all), oldest first.
func (p *Postgres) Chats(ctx context.Context, tenant string) ([]Chat, error) {
	out, err := p.chats(ctx, tenant, `$1 = '' OR c.tenant = $1`, tenant)
	if err != nil {
		return nil, fmt.Errorf("list chats: %w", err)
	}
	sortChats(out)
	return out, nil
}

// ChatsPage lists up to limit of a tenant's chats in id order after the id
// after, and whether more follow.
func (p *Postgres) ChatsPage(ctx context.Context, tenant, after string, limit int) ([]Chat, bool, error) {
	out, err := p.chats(ctx, tenant, `c.tenant = $1 AND c.id > $2 ORDER BY c.id LIMIT $3`, tenant, after, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list chats of %s: %w", tenant, err)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// chats reads the chats where says, each with its LastSeq from its log's
// primary key (the record's own copy is not kept current on Postgres: that
// would be a second write per append).
func (p *Postgres) chats(ctx context.Context, tenant, where string, args ...any) (out []Chat, err error) {
	err = p.read(ctx, tenant, func(c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT c.data, (SELECT coalesce(max(m.seq), 0) FROM messages m WHERE m.chat_id = c.id)
			FROM chats c WHERE `+where, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Chat, error) {
			var b []byte
			var last int64
			var c Chat
			if err := r.Scan(&b, &last); err != nil {
				return c, err
			}
			err := decode(b, &c)
			c.LastSeq = last
			return c, err
		})
		return err
	})
	if err == nil {
		p.seen(out...)
	}
	return out, err
}

// DeleteChat removes a chat, its log, its snapshot and request log, and
// the given records of other packages, in one transaction. ErrNotFound if
// there is no such chat.
func (p *Postgres) DeleteChat(ctx context.Context, id string, records ...RecordKey) error {
	if !holdable(id) {
		return fmt.Errorf("delete chat %s: %w", id, ErrNotFound)
	}
	err := p.update(ctx, func(t *pgTxn) error {
		tag, err := t.tx.Exec(t.ctx, `DELETE FROM chats WHERE id = $1`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		b := &pgx.Batch{}
		b.Queue(`DELETE FROM snapshots WHERE chat_id = $1`, id)
		b.Queue(`DELETE FROM request_log WHERE chat_id = $1`, id)
		b.Queue(`DELETE FROM messages WHERE chat_id = $1`, id)
		b.Queue(`DELETE FROM activity WHERE chat_id = $1`, id)
		b.Queue(`DELETE FROM chat_owners WHERE chat_id = $1`, id)
		for _, r := range records {
			b.Queue(`DELETE FROM records WHERE kind = $1 AND id = $2`, r.Kind, r.ID)
		}
		return t.tx.SendBatch(t.ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("delete chat %s: %w", id, err)
	}
	p.mu.Lock()
	delete(p.epochs, id)
	p.mu.Unlock()
	p.lanes.evict(id)
	return nil
}

// Claim makes this store the chat's single writer: it raises the chat's
// owner epoch and remembers it, and from then on every append and snapshot
// of the chat through this store checks the epoch inside its transaction,
// failing with ErrChatMoved once another store claimed the chat after
// this one. A session claims before it reads the log: the claim waits for
// the old owner's writes in flight (they hold a share lock on the epoch's
// row) and fences every later one, so what the new owner reads is all the
// old one will ever have written. The claim is one statement, its own
// committed transaction (not in a batch of the committer), on a reading
// connection taken as the chat's tenant's, holding one row lock and
// the chat's claim lock, an advisory lock taken before it waits for the
// row so that a write failed meanwhile can wait for the claim (movedOr);
// only claims and that re-read take it, so a deadlock still needs two
// claims crossing two nodes' batches; Postgres then fails one of them
// whole, and nothing of it lands.
func (p *Postgres) Claim(ctx context.Context, chatID string) error {
	var epoch int64
	// Once: a claim that reached the server may have taken the chat, and
	// another would take it again.
	err := p.onReader(ctx, p.lane(ctx, chatID), 1, func(c *pgxpool.Conn) error {
		// One statement, its own transaction, one round trip: the insert
		// reads the lock's row, so the lock is taken before the insert
		// waits for the owner row, and held until the claim commits.
		return c.QueryRow(ctx, `WITH claim AS MATERIALIZED (SELECT pg_advisory_xact_lock(hashtext('owner/' || $1::text)))
			INSERT INTO chat_owners (chat_id, epoch) SELECT $1::text, 1 FROM claim
			ON CONFLICT (chat_id) DO UPDATE SET epoch = chat_owners.epoch + 1 RETURNING epoch`, chatID).Scan(&epoch)
	})
	if err != nil {
		return fmt.Errorf("claim chat %s: %w", chatID, err)
	}
	p.mu.Lock()
	p.epochs[chatID] = epoch
	p.mu.Unlock()
	return nil
}

// fence fails with ErrChatMoved when another store claimed the chat after
// this one; a chat this store never claimed (a tool writing directly, not
// a session) is not fenced. The share lock holds a competing Claim until
// this transaction ends.
func (p *Postgres) fence(t *pgTxn, chatID string) error {
	return p.checkEpoch(t.ctx, t.tx, chatID)
}

// movedOr is err, a fenced write's failure, or ErrChatMoved when the chat
// moved: a write that failed for another reason (its connection cut while
// the node was paused mid-transaction, the server's idle-in-transaction
// timeout ending it so another node could claim) is told apart by reading
// the epoch again, after any claim in flight (recheckEpoch), so a claim
// that the cut let through is seen. It runs on the committer's goroutine,
// so a failed batch asks at most once when the server cannot be reached: a
// server that does not answer held every write behind a batch of n for n
// connect timeouts.
func (p *Postgres) movedOr(chatID string, err error) error {
	if errors.Is(err, ErrChatMoved) {
		return err
	}
	batch, wide := errors.AsType[*batchError](err)
	p.mu.Lock()
	asked := wide && batch == p.unreached
	p.mu.Unlock()
	if asked {
		return err
	}
	ctx, cancel := context.WithTimeout(p.life, connectTimeout)
	defer cancel()
	moved := p.recheckEpoch(ctx, chatID)
	if errors.Is(moved, ErrChatMoved) {
		return fmt.Errorf("%w; the write failed: %v", moved, err)
	}
	if moved != nil && wide {
		p.mu.Lock()
		p.unreached = batch
		p.mu.Unlock()
	}
	return err
}

// recheckEpoch is checkEpoch once any claim of the chat in flight has
// ended. The claim lock is what it waits on: a claim holds it from before
// it waits for the owner row, while the row alone lets a FOR SHARE in
// ahead of a claim still waiting for the cut transaction's share lock
// (whose end the server reports to the client before it releases it).
// It runs on the writer's connection, free once the failed batch is
// rolled back: the committer's goroutine asks it between batches.
func (p *Postgres) recheckEpoch(ctx context.Context, chatID string) error {
	p.mu.Lock()
	_, claimed := p.epochs[chatID]
	p.mu.Unlock()
	if !claimed {
		return nil
	}
	return p.writer.run(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(hashtext('owner/' || $1))`, chatID); err != nil {
			return err
		}
		return p.checkEpoch(ctx, tx, chatID)
	})
}

// rowQuerier is a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// checkEpoch fails with ErrChatMoved when the chat's owner epoch is no
// longer the one this store claimed (nil for a chat it never claimed).
func (p *Postgres) checkEpoch(ctx context.Context, q rowQuerier, chatID string) error {
	p.mu.Lock()
	mine, claimed := p.epochs[chatID]
	p.mu.Unlock()
	if !claimed {
		return nil
	}
	var epoch int64
	err := q.QueryRow(ctx, `SELECT epoch FROM chat_owners WHERE chat_id = $1 FOR SHARE`, chatID).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && epoch != mine) {
		return fmt.Errorf("%w (this node holds epoch %d, the chat is at %d)", ErrChatMoved, mine, epoch)
	}
	return err
}

// Append stores messages at the end of a chat's log, assigning each the
// next seq, and returns them with their seqs once committed.
func (p *Postgres) Append(ctx context.Context, chatID string, msgs ...chat.Message) ([]chat.Message, error) {
	return waitFor(func(then func([]chat.Message, error)) { p.appendMsgs(ctx, chatID, msgs, false, then) })
}

// AppendUnsynced is Append for messages that need not survive a crash on
// their own (see Store.AppendUnsynced).
func (p *Postgres) AppendUnsynced(ctx context.Context, chatID string, msgs ...chat.Message) ([]chat.Message, error) {
	return waitFor(func(then func([]chat.Message, error)) { p.appendMsgs(ctx, chatID, msgs, true, then) })
}

// AppendThen is Append without waiting (see Store.AppendThen). A durable
// commit is Postgres's sync.
func (p *Postgres) AppendThen(ctx context.Context, chatID string, msgs []chat.Message, then func(stored []chat.Message, err error)) {
	p.appendMsgs(ctx, chatID, msgs, false, then)
}

func (p *Postgres) appendMsgs(ctx context.Context, chatID string, msgs []chat.Message, unsynced bool, then func([]chat.Message, error)) {
	out := slices.Clone(msgs)
	queueResult(ctx, p.w, func(t *pgTxn) error {
		_, err := p.appendTx(t, chatID, out)
		return err
	}, unsynced, out, func(err error) error { return fmt.Errorf("append to chat %s: %w", chatID, p.movedOr(chatID, err)) }, then)
}

// AppendWithSnapshotThen appends msgs and saves the snapshot snap builds
// from the log's last seq in the same transaction, after storing acts in
// the activity log (see Store.AppendWithSnapshotThen).
func (p *Postgres) AppendWithSnapshotThen(ctx context.Context, chatID string, snap func(lastSeq int64) Snapshot, acts []Activity, msgs []chat.Message,
	then func(stored []chat.Message, err error)) {
	out := slices.Clone(msgs)
	acts = stampedAll(acts)
	queueResult(ctx, p.w, func(t *pgTxn) error {
		if err := appendActivities(t, chatID, acts, appendActivityTx); err != nil {
			return err
		}
		last, err := p.appendTx(t, chatID, out)
		if err != nil {
			return err
		}
		val, err := encodeSnapshot(snap(last))
		if err != nil {
			return err
		}
		return saveSnapshotTx(t, chatID, val)
	}, false, out, func(err error) error {
		return fmt.Errorf("append to chat %s with its snapshot: %w", chatID, p.movedOr(chatID, err))
	}, then)
}

// appendTx writes out at the end of a chat's log and returns the seq of
// the log's last message. One statement numbers and inserts them (one
// round trip a write: the writer's cost is its round trips), so the seqs
// come from the database: the stored values carry seq 0, and a read takes
// each message's seq from its row.
func (p *Postgres) appendTx(t *pgTxn, chatID string, out []chat.Message) (int64, error) {
	if err := p.fence(t, chatID); err != nil {
		return 0, err
	}
	if len(out) == 0 {
		var last int64
		err := t.tx.QueryRow(t.ctx, `SELECT coalesce(max(seq), 0) FROM messages WHERE chat_id = $1`, chatID).Scan(&last)
		return last, err
	}
	for i := range out {
		out[i].Seq = 0
	}
	vals, err := stamp(out, -1)
	if err != nil {
		return 0, err
	}
	texts, keys := make([]string, len(vals)), make([]string, len(vals))
	for i, v := range vals {
		texts[i], keys[i] = string(v), out[i].IdempotencyKey
	}
	var first int64
	err = t.tx.QueryRow(t.ctx, `WITH last AS (SELECT coalesce(max(seq), 0) AS n FROM messages WHERE chat_id = $1),
		ins AS (INSERT INTO messages (chat_id, seq, data, idempotency_key)
			SELECT $1, last.n + m.i, m.d::json, nullif(m.k, '') FROM last, unnest($2::text[], $3::text[]) WITH ORDINALITY AS m(d, k, i))
		SELECT n + 1 FROM last`, chatID, texts, keys).Scan(&first)
	if err != nil {
		return 0, err
	}
	for i := range out {
		out[i].Seq = first + int64(i)
	}
	last := out[len(out)-1].Seq
	return last, titleTx(t, chatID, last, out)
}

// titleTx gives an untitled chat a title from the person's first words,
// in the append's transaction; appends of no person's message skip it.
func titleTx(t *pgTxn, chatID string, last int64, out []chat.Message) error {
	if !slices.ContainsFunc(out, func(m chat.Message) bool { return m.Role == chat.RoleUser && m.Origin == chat.OriginPerson }) {
		return nil
	}
	var b []byte
	switch err := t.tx.QueryRow(t.ctx, `SELECT data FROM chats WHERE id = $1 FOR UPDATE`, chatID).Scan(&b); {
	case errors.Is(err, pgx.ErrNoRows):
		return nil // a log without a record: tests, or a chat being deleted
	case err != nil:
		return err
	}
	var c Chat
	if err := decode(b, &c); err != nil || c.Title != "" {
		return err
	}
	noteAppended(&c, last, out)
	val, err := encode(c)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(t.ctx, `UPDATE chats SET data = $2 WHERE id = $1`, chatID, val)
	return err
}

// ImportChat stores a new chat with its whole log, snapshot and recs in
// one transaction, renumbered from 1; it fails if the id exists.
func (p *Postgres) ImportChat(ctx context.Context, c Chat, snap Snapshot, msgs []chat.Message, recs ...RecordPut) error {
	out := make([]chat.Message, len(msgs))
	copy(out, msgs)
	c.LastSeq = int64(len(out))
	vals, err := stamp(out, 0)
	if err != nil {
		return fmt.Errorf("import chat %s: %w", c.ID, err)
	}
	cval, err := encode(c)
	if err != nil {
		return fmt.Errorf("import chat %s: %w", c.ID, err)
	}
	snap.held = heldSummary{} // a new chat: the store holds none of it
	sval, err := encodeSnapshot(snap)
	if err != nil {
		return fmt.Errorf("import chat %s: %w", c.ID, err)
	}
	rvals, err := encodeRecords(recs)
	if err != nil {
		return fmt.Errorf("import chat %s: %w", c.ID, err)
	}
	err = p.update(ctx, func(t *pgTxn) error {
		tag, err := t.tx.Exec(t.ctx, `INSERT INTO chats (id, tenant, data) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING`, c.ID, c.Tenant, cval)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("chat %s already exists", c.ID)
		}
		b := &pgx.Batch{}
		for i, v := range vals {
			b.Queue(`INSERT INTO messages (chat_id, seq, data, idempotency_key) VALUES ($1, $2, $3, nullif($4, ''))`, c.ID, out[i].Seq, v, out[i].IdempotencyKey)
		}
		b.Queue(`INSERT INTO snapshots (chat_id, data, turn) VALUES ($1, $2, $3)`, c.ID, sval.whole, sval.turn)
		queueRequests(b, c.ID, sval)
		for i, r := range recs {
			b.Queue(`INSERT INTO records (kind, id, data) VALUES ($1, $2, $3)
				ON CONFLICT (kind, id) DO UPDATE SET data = excluded.data`, r.Kind, r.ID, rvals[i])
		}
		return t.tx.SendBatch(t.ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("import chat %s: %w", c.ID, err)
	}
	p.seen(c)
	return nil
}

// Messages returns the messages with from <= seq <= to (to 0: to the end).
func (p *Postgres) Messages(ctx context.Context, chatID string, from, to int64) ([]chat.Message, error) {
	return p.MessagesWithin(ctx, chatID, from, to, 0)
}

// MessagesWithin is Messages stopped once the messages read hold maxBytes
// of stored values (0: no bound), as the Badger store's: the first message
// whatever its size, and none after the one that reaches the bound.
func (p *Postgres) MessagesWithin(ctx context.Context, chatID string, from, to int64, maxBytes int) ([]chat.Message, error) {
	var out []chat.Message
	err := p.read(ctx, p.lane(ctx, chatID), func(c *pgxpool.Conn) error {
		var rows pgx.Rows
		var err error
		if maxBytes <= 0 { // an unbounded read (a chat's wake) sums no sizes
			rows, err = c.Query(ctx, `SELECT seq, data FROM messages WHERE chat_id = $1 AND seq >= $2 AND ($3 <= 0 OR seq <= $3) ORDER BY seq`, chatID, from, to)
		} else {
			rows, err = c.Query(ctx, `SELECT seq, data FROM (
				SELECT seq, data, sum(octet_length(data::text)) OVER (ORDER BY seq) - octet_length(data::text) AS before
				FROM messages WHERE chat_id = $1 AND seq >= $2 AND ($3 <= 0 OR seq <= $3)) m
				WHERE before < $4 ORDER BY seq`, chatID, from, to, maxBytes)
		}
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (chat.Message, error) {
			var seq int64
			var b []byte
			var m chat.Message
			if err := r.Scan(&seq, &b); err != nil {
				return m, err
			}
			if err := decode(b, &m); err != nil {
				return m, fmt.Errorf("seq %d: %w", seq, err)
			}
			m.Seq = seq // the row's, not the value's (see appendTx)
			return m, nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read chat %s messages: %w", chatID, err)
	}
	return out, nil
}

// LastSeq returns the seq of a chat's last message (0 when empty).
func (p *Postgres) LastSeq(ctx context.Context, chatID string) (int64, error) {
	var seq int64
	err := p.read(ctx, p.lane(ctx, chatID), func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM messages WHERE chat_id = $1`, chatID).Scan(&seq)
	})
	return seq, err
}

// saveSnapshotTx writes a chat's snapshot records and what changed of its
// request log, in one round trip. A save that writes the turn record alone
// finds the whole one its load or last save left, or fails.
func saveSnapshotTx(t *pgTxn, chatID string, snap storedSnapshot) error {
	b := &pgx.Batch{}
	if snap.whole != nil {
		b.Queue(`INSERT INTO snapshots (chat_id, data, turn) VALUES ($1, $2, $3)
			ON CONFLICT (chat_id) DO UPDATE SET data = excluded.data, turn = excluded.turn`, chatID, snap.whole, snap.turn)
	} else {
		b.Queue(`UPDATE snapshots SET turn = $2 WHERE chat_id = $1`, chatID, snap.turn)
	}
	queueRequests(b, chatID, snap)
	br := t.tx.SendBatch(t.ctx, b)
	tag, err := br.Exec()
	if err == nil && tag.RowsAffected() == 0 {
		err = fmt.Errorf("chat %s has no snapshot for its turn record", chatID)
	}
	if err != nil {
		_ = br.Close()
		return err
	}
	return br.Close()
}

// queueRequests queues the writes of a save's requests (and the deletion
// of those that left the log) to b.
func queueRequests(b *pgx.Batch, chatID string, snap storedSnapshot) {
	if len(snap.reqs) > 0 {
		texts := make([]string, len(snap.reqs))
		for i, v := range snap.reqs {
			texts[i] = string(v)
		}
		b.Queue(`INSERT INTO request_log (chat_id, n, data)
			SELECT $1, $2 + r.i - 1, r.d::json FROM unnest($3::text[]) WITH ORDINALITY AS r(d, i)
			ON CONFLICT (chat_id, n) DO UPDATE SET data = excluded.data`, chatID, snap.first, texts)
	}
	if snap.dropFrom < snap.dropTo {
		b.Queue(`DELETE FROM request_log WHERE chat_id = $1 AND n >= $2 AND n < $3`, chatID, snap.dropFrom, snap.dropTo)
	}
}

// SaveSnapshot writes a chat's snapshot, durably, and acts to its
// activity log in the same transaction (see Store.SaveSnapshot).
func (p *Postgres) SaveSnapshot(ctx context.Context, chatID string, snap Snapshot, acts ...Activity) error {
	return p.saveSnapshot(ctx, chatID, snap, acts, false)
}

// SaveSnapshotUnsynced is SaveSnapshot without a sync of its own (see
// Store.SaveSnapshotUnsynced): a commit with synchronous_commit off, which
// the next synchronous commit's WAL flush covers.
func (p *Postgres) SaveSnapshotUnsynced(ctx context.Context, chatID string, snap Snapshot, acts ...Activity) error {
	return p.saveSnapshot(ctx, chatID, snap, acts, true)
}

// saveSnapshot asks whether a failed save's chat moved (movedOr) on the
// committer's goroutine, as appends do: asked on each caller's, a failed
// batch's saves all asked at once, none seeing another's question go
// unanswered, and each held the writer's connection for a connect timeout.
func (p *Postgres) saveSnapshot(ctx context.Context, chatID string, snap Snapshot, acts []Activity, unsynced bool) error {
	val, err := encodeSnapshot(snap)
	if err != nil {
		return err
	}
	acts = stampedAll(acts)
	_, err = waitFor(func(then func(struct{}, error)) {
		queueResult(ctx, p.w, func(t *pgTxn) error {
			if err := p.fence(t, chatID); err != nil {
				return err
			}
			if err := appendActivities(t, chatID, acts, appendActivityTx); err != nil {
				return err
			}
			return saveSnapshotTx(t, chatID, val)
		}, unsynced, struct{}{}, func(err error) error {
			return fmt.Errorf("save snapshot of %s: %w", chatID, p.movedOr(chatID, err))
		}, then)
	})
	return err
}

// LoadSnapshot reads a chat's snapshot, with its request log (in the
// same round trip); ok is false when none was saved.
func (p *Postgres) LoadSnapshot(ctx context.Context, chatID string) (snap Snapshot, ok bool, err error) {
	var val, turnVal []byte
	var ns []int64
	var reqs []string
	err = p.read(ctx, p.lane(ctx, chatID), func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT data, turn, ARRAY(SELECT r.n FROM request_log r WHERE r.chat_id = $1 ORDER BY r.n),
			ARRAY(SELECT r.data::text FROM request_log r WHERE r.chat_id = $1 ORDER BY r.n)
			FROM snapshots WHERE chat_id = $1`, chatID).Scan(&val, &turnVal, &ns, &reqs)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Snapshot{}, false, nil
	}
	var whole, turn Snapshot
	if err == nil {
		err = decode(val, &whole)
	}
	if err == nil && turnVal != nil {
		err = decode(turnVal, &turn)
	}
	if err == nil {
		snap = joinSummary(whole, turn, turnVal != nil)
	}
	var stored []chat.RequestLog
	if err == nil && len(snap.Requests) == 0 && snap.RequestsLogged > 0 {
		for i, r := range reqs {
			var rl chat.RequestLog
			if ns[i] > snap.RequestsLogged { // see storedLog
				break
			}
			if err = decode([]byte(r), &rl); err != nil {
				err = fmt.Errorf("request log: %w", err)
				break
			}
			stored = append(stored, rl)
		}
	}
	if err != nil {
		return snap, false, fmt.Errorf("load snapshot of %s: %w", chatID, err)
	}
	loadedRequests(&snap, stored)
	return snap, true, nil
}

// LearnWindow records a window a refusal named for provider/model; the
// smaller of the old and new value is kept. It reports the value kept.
func (p *Postgres) LearnWindow(ctx context.Context, provider, model string, window int) (int, error) {
	var kept int
	err := p.update(ctx, func(t *pgTxn) error {
		return t.tx.QueryRow(t.ctx, `INSERT INTO learned_windows (provider, model, size) VALUES ($1, $2, $3)
			ON CONFLICT (provider, model) DO UPDATE SET size = CASE
				WHEN learned_windows.size > 0 AND learned_windows.size < excluded.size THEN learned_windows.size
				ELSE excluded.size END
			RETURNING size`, provider, model, window).Scan(&kept)
	})
	if err != nil {
		return 0, fmt.Errorf("learn window of %s/%s: %w", provider, model, err)
	}
	return kept, nil
}

// LearnedWindows returns every learned window keyed "provider/model".
func (p *Postgres) LearnedWindows(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	err := p.read(ctx, p.lane(ctx, ""), func(c *pgxpool.Conn) error {
		clear(out) // a try cut midway left some
		rows, err := c.Query(ctx, `SELECT provider, model, size FROM learned_windows`)
		if err != nil {
			return err
		}
		var prov, model string
		var size int
		_, err = pgx.ForEachRow(rows, []any{&prov, &model, &size}, func() error {
			out[prov+"/"+model] = size
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("learned windows: %w", err)
	}
	return out, nil
}

// PutRecord stores a generic record (memories, learning runs, marks).
func (p *Postgres) PutRecord(ctx context.Context, kind, id string, v any) error {
	return p.PutRecords(ctx, RecordPut{Kind: kind, ID: id, V: v})
}

// PutRecords stores generic records in one transaction, durably: all or
// none.
func (p *Postgres) PutRecords(ctx context.Context, recs ...RecordPut) error {
	vals, err := encodeRecords(recs)
	if err != nil {
		return err
	}
	return p.update(ctx, func(t *pgTxn) error {
		for i, r := range recs {
			if _, err := t.tx.Exec(t.ctx, `INSERT INTO records (kind, id, data) VALUES ($1, $2, $3)
				ON CONFLICT (kind, id) DO UPDATE SET data = excluded.data`, r.Kind, r.ID, vals[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteRecord removes a generic record; a missing one is no error.
func (p *Postgres) DeleteRecord(ctx context.Context, kind, id string) error {
	if !holdable(kind) || !holdable(id) {
		return nil
	}
	return p.exec(ctx, `DELETE FROM records WHERE kind = $1 AND id = $2`, kind, id)
}

// Record reads one generic record into v.
func (p *Postgres) Record(ctx context.Context, kind, id string, v any) error {
	if !holdable(kind) || !holdable(id) {
		return fmt.Errorf("%s %s: %w", kind, id, ErrNotFound)
	}
	if err := p.get(ctx, p.lane(ctx, ""), v, `SELECT data FROM records WHERE kind = $1 AND id = $2`, kind, id); err != nil {
		return fmt.Errorf("%s %s: %w", kind, id, err)
	}
	return nil
}

// Records calls fn for every record of a kind, in id order; fn decodes.
// The rows are read before fn runs, so fn may use the store.
func (p *Postgres) Records(ctx context.Context, kind string, fn func(id string, decode func(v any) error) error) error {
	return p.RecordsPrefix(ctx, kind, "", fn)
}

// RecordsPrefix is Records for the ids that start with prefix: no other
// row of the kind is sent or decoded (one tenant's records when the ids
// are "<tenant>/…"). id is COLLATE "C", so "id >= prefix" is byte order,
// where the primary key's index starts the scan; left() is the exact test.
func (p *Postgres) RecordsPrefix(ctx context.Context, kind, prefix string, fn func(id string, decode func(v any) error) error) error {
	if !holdable(kind) || !holdable(prefix) {
		return nil
	}
	var ids []string
	var vals [][]byte
	err := p.read(ctx, p.lane(ctx, ""), func(c *pgxpool.Conn) error {
		ids, vals = ids[:0], vals[:0] // a try cut midway left some
		rows, err := c.Query(ctx, `SELECT id, data FROM records
			WHERE kind = $1 AND id >= $2 AND left(id, length($2)) = $2 ORDER BY id`, kind, prefix)
		if err != nil {
			return err
		}
		var id string
		var b []byte
		_, err = pgx.ForEachRow(rows, []any{&id, &b}, func() error {
			ids, vals = append(ids, id), append(vals, b)
			return nil
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("%s records: %w", kind, err)
	}
	for i, id := range ids {
		if err := fn(id, func(v any) error { return decode(vals[i], v) }); err != nil {
			return err
		}
	}
	return nil
}

// AppendActivity stores a at the end of a chat's activity log, durably,
// with its ID and AfterSeq set in the same statement (one round trip).
func (p *Postgres) AppendActivity(ctx context.Context, chatID string, a Activity) (Activity, error) {
	return p.appendActivity(ctx, chatID, a, p.w.do)
}

// AppendActivityUnsynced is AppendActivity without a sync of its own (see
// Store.AppendActivityUnsynced).
func (p *Postgres) AppendActivityUnsynced(ctx context.Context, chatID string, a Activity) (Activity, error) {
	return p.appendActivity(ctx, chatID, a, p.w.doUnsynced)
}

func (p *Postgres) appendActivity(ctx context.Context, chatID string, a Activity, do func(func(*pgTxn) error) error) (Activity, error) {
	return appendActivityWith(ctx, chatID, a, do, appendActivityTx)
}

// appendActivityTx writes a at the end of the chat's activity log in t
// and returns it with its ID and AfterSeq set.
func appendActivityTx(t *pgTxn, chatID string, a Activity) (Activity, error) {
	// The chat's lock orders concurrent writers of one chat; a chat with
	// no record yet (tests) serialises on the advisory lock.
	if _, err := t.tx.Exec(t.ctx, `SELECT pg_advisory_xact_lock(hashtext('activity/' || $1))`, chatID); err != nil {
		return a, err
	}
	if err := t.tx.QueryRow(t.ctx, `SELECT (SELECT coalesce(max(id), 0) + 1 FROM activity WHERE chat_id = $1),
		(SELECT coalesce(max(seq), 0) FROM messages WHERE chat_id = $1)`, chatID).Scan(&a.ID, &a.AfterSeq); err != nil {
		return a, err
	}
	val, err := encode(a)
	if err != nil {
		return a, err
	}
	_, err = t.tx.Exec(t.ctx, `INSERT INTO activity (chat_id, id, data) VALUES ($1, $2, $3)`, chatID, a.ID, val)
	return a, err
}

// ActivityPage returns up to limit of a chat's activity items with ID >
// after, oldest first, and whether more follow.
func (p *Postgres) ActivityPage(ctx context.Context, chatID string, after int64, limit int) ([]Activity, bool, error) {
	var out []Activity
	err := p.read(ctx, p.lane(ctx, chatID), func(c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT data FROM activity WHERE chat_id = $1 AND id > $2 ORDER BY id LIMIT $3`, chatID, max(after, 0), limit+1)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Activity, error) {
			var b []byte
			var a Activity
			if err := r.Scan(&b); err != nil {
				return a, err
			}
			return a, decode(b, &a)
		})
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("read activity of chat %s: %w", chatID, err)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}
