package attachments

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/chat"
)

func put(t *testing.T, s *Store, content, name, mediaType string) (chat.Attachment, error) {
	t.Helper()
	a, err := s.Put(context.Background(), strings.NewReader(content), name, mediaType, Quota{})
	remember(s, a)
	return a, err
}

// blobs lists the stored content files (not sidecars, not temp files).
func blobs(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(s.dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && validID(filepath.Base(filepath.Dir(p))+d.Name()) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestPutIsContentAddressedAndStoredOnce(t *testing.T) {
	s := newStore(t, 0)
	content := "alpha\nbeta\ngamma\n"
	sum := sha256.Sum256([]byte(content))
	want := hex.EncodeToString(sum[:])

	a1, err := s.Put(context.Background(), strings.NewReader(content), "a.txt", "", Quota{})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := s.Put(context.Background(), strings.NewReader(content), "copy.md", "text/markdown", Quota{})
	if err != nil {
		t.Fatal(err)
	}
	if a1.ID != want || a2.ID != want {
		t.Fatalf("ids %s, %s; want the sha256 %s", a1.ID, a2.ID, want)
	}
	if a1.Name != "a.txt" || a2.Name != "copy.md" || a2.MediaType != "text/markdown" {
		t.Errorf("each attachment keeps its own name and declared type: %+v %+v", a1, a2)
	}
	if got := s.Used(); got != int64(len(content)) {
		t.Errorf("Used = %d after storing the same bytes twice, want %d", got, len(content))
	}
	if got := blobs(t, s); len(got) != 1 || filepath.Base(filepath.Dir(got[0])) != want[:2] {
		t.Errorf("blobs on disk = %v, want one under %s/", got, want[:2])
	}
	f, err := s.Open(want)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, _ := io.ReadAll(f); string(got) != content {
		t.Errorf("Open returned %q", got)
	}
}

// TestTheStoreChecksOnlyThatAFileFitsItsLimit: the store refuses a file
// bigger than the whole limit while it arrives, and counts no total of its
// own: the bytes on disk, where another tenant's stored bytes take no room
// again, would tell whether they were there. The total is the Quota's.
func TestTheStoreChecksOnlyThatAFileFitsItsLimit(t *testing.T) {
	s := newStore(t, 100)
	sixty := strings.Repeat("a", 59) + "\n"
	other := strings.Repeat("b", 59) + "\n"
	for _, content := range []string{sixty, other, sixty} {
		if _, err := put(t, s, content, "f", ""); err != nil {
			t.Fatalf("60 bytes under a 100-byte limit: %v", err)
		}
	}
	if _, err := put(t, s, strings.Repeat("c", 101), "huge", ""); !errors.Is(err, ErrStorageFull) {
		t.Errorf("a file bigger than the whole limit: err = %v, want ErrStorageFull", err)
	}
	if got := s.Used(); got != 120 {
		t.Errorf("Used = %d, want 120 (each file's bytes once)", got)
	}
	entries, _ := os.ReadDir(s.tmpDir())
	if len(entries) != 0 {
		t.Errorf("refused puts left temp files: %v", entries)
	}

	reopened, err := NewStore(s.dir, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := reopened.Used(); got != 120 {
		t.Errorf("reopened store measures %d bytes used, want 120", got)
	}
	if _, err := NewStore(t.TempDir(), -1); err == nil {
		t.Error("a negative limit should be refused")
	}
}

// TestAQuotaIsCheckedBesideTheStorageLimit: an owner's share refuses a
// file bigger than it while the bytes arrive, and its Charge decides once
// the file is whole, for stored bytes too; a refused file is not stored.
func TestAQuotaIsCheckedBesideTheStorageLimit(t *testing.T) {
	s := newStore(t, 0)
	var asked []string
	full := false
	q := Quota{Max: 50, Charge: func(id string, size int64) error {
		asked = append(asked, fmt.Sprintf("%s:%d", id[:8], size))
		if full {
			return fmt.Errorf("the owner's share is used: %w", ErrStorageFull)
		}
		return nil
	}}
	putAs := func(content string) error {
		_, err := s.Put(context.Background(), strings.NewReader(content), "f.txt", "", q)
		return err
	}
	if err := putAs(strings.Repeat("x", 51)); !errors.Is(err, ErrStorageFull) || len(asked) != 0 {
		t.Fatalf("a file bigger than the share: err = %v, Charge asked %v; want ErrStorageFull before any Charge", err, asked)
	}
	ten := "0123456789"
	sum := sha256.Sum256([]byte(ten))
	want := hex.EncodeToString(sum[:4]) + ":10"
	full = true
	if err := putAs(ten); !errors.Is(err, ErrStorageFull) {
		t.Fatalf("a file Charge refuses: err = %v, want ErrStorageFull", err)
	}
	if got := blobs(t, s); len(got) != 0 || s.Used() != 0 {
		t.Fatalf("a refused file was stored: %v, %d bytes used", got, s.Used())
	}
	full = false
	if err := putAs(ten); err != nil {
		t.Fatal(err)
	}
	if err := putAs(ten); err != nil {
		t.Fatal(err)
	}
	if wantAsked := []string{want, want, want}; !slices.Equal(asked, wantAsked) {
		t.Errorf("Charge asked %v, want %v (stored bytes are asked too)", asked, wantAsked)
	}
	if s.Used() != 10 {
		t.Errorf("Used = %d, want 10", s.Used())
	}
}

func TestPutHonoursCancellation(t *testing.T) {
	s := newStore(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Put(ctx, strings.NewReader("x"), "x", "", Quota{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if got := blobs(t, s); len(got) != 0 {
		t.Errorf("a cancelled put stored %v", got)
	}
}

func TestFactsSurviveRestartAndAreRebuilt(t *testing.T) {
	s := newStore(t, 0)
	a, err := put(t, s, "one\ntwo\nthree", "t.txt", "")
	if err != nil {
		t.Fatal(err)
	}
	sidecar := s.factsPath(a.ID, readingOf(a.Name, a.MediaType))
	for name, damage := range map[string]func(){
		"intact":  func() {},
		"missing": func() { os.Remove(sidecar) },
		"garbage": func() { os.WriteFile(sidecar, []byte("{nope"), 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			damage()
			s2, err := NewStore(s.dir, 0)
			if err != nil {
				t.Fatal(err)
			}
			f, err := s2.FactsOf(a)
			if err != nil {
				t.Fatal(err)
			}
			// Three lines: the last has no newline but still counts.
			if f.Lines != 3 || f.Size != 13 || f.Kind != KindText {
				t.Errorf("facts = %+v, want 3 lines, 13 bytes, text", f)
			}
		})
	}
}

func TestIDsCannotEscapeTheStore(t *testing.T) {
	s := newStore(t, 0)
	for name, id := range map[string]string{
		"traversal": "../../../../etc/passwd",
		"short":     "abc",
		"uppercase": strings.Repeat("A", 64),
		"slash":     strings.Repeat("a", 31) + "/" + strings.Repeat("a", 32),
		"empty":     "",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := s.Open(id); !errors.Is(err, ErrBadID) {
				t.Errorf("Open(%q) err = %v, want ErrBadID", id, err)
			}
			if _, err := s.FactsOf(chat.Attachment{ID: id}); !errors.Is(err, ErrBadID) {
				t.Errorf("Facts(%q) err = %v, want ErrBadID", id, err)
			}
		})
	}
	if _, err := s.Open(strings.Repeat("a", 64)); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown id: err = %v, want ErrNotFound", err)
	}
}

func TestKindComesFromTheBytes(t *testing.T) {
	pdfBytes, err := os.ReadFile(makePDF(t, testPDF{Pages: 2}))
	if err != nil {
		t.Fatal(err)
	}
	binary := string([]byte{0, 1, 2, 3, 0xff, 0xfe, 0})
	cases := map[string]struct {
		content, declared string
		want              Kind
	}{
		"pdf sniffed":                 {string(pdfBytes), "", KindPDF},
		"pdf declared as text":        {string(pdfBytes), "text/plain", KindPDF},
		"png":                         {string(pngBytes(t, 4, 3)), "", KindImage},
		"plain text":                  {"hello\n", "", KindText},
		"json declared":               {`{"a":1}`, "application/json", KindText},
		"binary":                      {binary, "", KindBinary},
		"binary declared as json":     {binary, "application/json", KindText},
		"text claiming to be a image": {"just words\n", "image/png", KindText},
		"empty":                       {"", "", KindText},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, 0)
			a, err := put(t, s, c.content, name, c.declared)
			if err != nil {
				t.Fatal(err)
			}
			f, err := s.FactsOf(a)
			if err != nil {
				t.Fatal(err)
			}
			if f.Kind != c.want {
				t.Errorf("kind = %s (media type %s), want %s", f.Kind, f.MediaType, c.want)
			}
		})
	}
}

func TestPutPath(t *testing.T) {
	root := t.TempDir()
	allowed := filepath.Join(root, "allowed")
	outside := filepath.Join(root, "outside")
	evil := filepath.Join(root, "allowed-evil") // shares allowed's prefix
	for _, d := range []string{allowed, filepath.Join(allowed, "sub"), outside, evil} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string) {
		if err := os.WriteFile(p, []byte("content of "+filepath.Base(p)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(allowed, "ok.txt"))
	write(filepath.Join(allowed, "sub", "deep.txt"))
	write(filepath.Join(outside, "secret.txt"))
	write(filepath.Join(evil, "x.txt"))
	symlink := func(target, link string) {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	symlink(filepath.Join(outside, "secret.txt"), filepath.Join(allowed, "link-out.txt"))
	symlink(filepath.Join(outside), filepath.Join(allowed, "dir-out"))
	symlink(filepath.Join(allowed, "ok.txt"), filepath.Join(outside, "link-in.txt"))
	// No writer ever opens the FIFO: an open that waited for one would hang.
	if err := syscall.Mkfifo(filepath.Join(allowed, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(allowed, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	cases := map[string]struct {
		path    string
		allowed []string
		want    error // nil: stored
	}{
		"file in allowed dir":              {filepath.Join(allowed, "ok.txt"), []string{allowed}, nil},
		"file in a subdirectory":           {filepath.Join(allowed, "sub", "deep.txt"), []string{allowed}, nil},
		"dot-dot out":                      {filepath.Join(allowed, "..", "outside", "secret.txt"), []string{allowed}, ErrPathNotAllowed},
		"symlink pointing out":             {filepath.Join(allowed, "link-out.txt"), []string{allowed}, ErrPathNotAllowed},
		"through a symlinked dir":          {filepath.Join(allowed, "dir-out", "secret.txt"), []string{allowed}, ErrPathNotAllowed},
		"symlink from outside pointing in": {filepath.Join(outside, "link-in.txt"), []string{allowed}, ErrPathNotAllowed},
		"absolute path outside":            {filepath.Join(outside, "secret.txt"), []string{allowed}, ErrPathNotAllowed},
		"nothing there, inside":            {filepath.Join(allowed, "none.txt"), []string{allowed}, ErrPathNotFound},
		"nothing there, outside":           {filepath.Join(outside, "none.txt"), []string{allowed}, ErrPathNotAllowed},
		"nothing there, via a link out":    {filepath.Join(allowed, "dir-out", "none.txt"), []string{allowed}, ErrPathNotAllowed},
		"a FIFO inside":                    {filepath.Join(allowed, "fifo"), []string{allowed}, ErrNotRegular},
		"a socket inside":                  {filepath.Join(allowed, "sock"), []string{allowed}, ErrNotRegular},
		"sibling sharing the prefix":       {filepath.Join(evil, "x.txt"), []string{allowed}, ErrPathNotAllowed},
		"no allowed dirs":                  {filepath.Join(allowed, "ok.txt"), nil, ErrPathNotAllowed},
		"the allowed dir itself":           {allowed, []string{allowed}, ErrNotRegular},
		"a directory inside":               {filepath.Join(allowed, "sub"), []string{allowed}, ErrNotRegular},
		"second allowed dir matches":       {filepath.Join(outside, "secret.txt"), []string{allowed, outside}, nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, 0)
			a, err := s.PutPath(context.Background(), c.path, c.allowed, Quota{})
			if c.want != nil {
				if !errors.Is(err, c.want) {
					t.Fatalf("err = %v, want %v", err, c.want)
				}
				if len(blobs(t, s)) != 0 {
					t.Error("a refused path was stored")
				}
				if strings.Contains(strings.ReplaceAll(err.Error(), c.path, ""), root) {
					t.Errorf("the refusal names a path of the daemon's: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			real, _ := filepath.EvalSymlinks(c.path)
			want, _ := os.ReadFile(real)
			f, err := s.Open(a.ID)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if got, _ := io.ReadAll(f); !bytes.Equal(got, want) {
				t.Errorf("stored %q, want %q", got, want)
			}
		})
	}
}

func TestPutPathRefusalsDoNotTellWhatExistsOrWhereTheDaemonRuns(t *testing.T) {
	root := t.TempDir()
	allowed, outside := filepath.Join(root, "allowed"), filepath.Join(root, "outside")
	for _, d := range []string{allowed, outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(allowed)
	s := newStore(t, 0)
	refusal := func(path string) string {
		_, err := s.PutPath(context.Background(), path, []string{allowed}, Quota{})
		if err == nil {
			t.Fatalf("%s was attached", path)
		}
		if strings.Contains(strings.ReplaceAll(err.Error(), path, ""), root) {
			t.Errorf("the refusal of %s names the working directory: %v", path, err)
		}
		return strings.ReplaceAll(err.Error(), path, "PATH")
	}
	for _, pair := range [][2]string{
		{"../outside/secret.txt", "../outside/nothing.txt"},
		{filepath.Join(outside, "secret.txt"), filepath.Join(outside, "nothing.txt")},
		{"/etc/passwd", "/etc/no-such-file"},
	} {
		if there, none := refusal(pair[0]), refusal(pair[1]); there != none {
			t.Errorf("an existing and a missing file outside are refused differently:\n %s\n %s", there, none)
		}
	}
}

// TestPutPathSymlinkSwapNeverAttachesTheOutside races PutPath against a
// goroutine that swaps a regular file under the allowed dir with a symlink
// to a secret outside it, the check-then-open attack: whatever moment the
// swap lands, the attachment is the regular file's bytes or a refusal.
func TestPutPathSymlinkSwapNeverAttachesTheOutside(t *testing.T) {
	root := t.TempDir()
	allowed := filepath.Join(root, "allowed")
	if err := os.MkdirAll(allowed, 0o700); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(root, "secret")
	if err := os.WriteFile(secret, []byte("TOKEN=outside-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	target, link := filepath.Join(allowed, "doc.txt"), filepath.Join(allowed, ".link")
	if err := os.WriteFile(target, []byte("public\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			// One atomic exchange of the two names a call: doc.txt is always
			// either the regular file or the symlink, and flips as fast as
			// the kernel allows, so the swap lands between any two steps.
			if err := unix.Renameat2(unix.AT_FDCWD, link, unix.AT_FDCWD, target, unix.RENAME_EXCHANGE); err != nil {
				t.Error(err)
				return
			}
		}
	})
	defer wg.Wait() // the swapper stops before the temp dir goes, even on Fatal
	defer close(stop)
	s := newStore(t, 0)
	var stored, refused int
	for range 2000 {
		a, err := s.PutPath(context.Background(), target, []string{allowed}, Quota{})
		if err != nil {
			if !errors.Is(err, ErrPathNotAllowed) && !errors.Is(err, ErrPathNotFound) {
				t.Errorf("unexpected refusal: %v", err)
			}
			refused++
			continue
		}
		f, err := s.Open(a.ID)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(f)
		f.Close()
		if string(got) != "public\n" {
			t.Fatalf("attached %q through a swapped symlink", got)
		}
		stored++
	}
	t.Logf("%d attached, %d refused", stored, refused)
}

// TestSweepSparesBytesStoredAgainSinceItsCutoff: an upload of bytes stored
// long ago, committed after the sweep's cutoff but not yet held (its
// caller records the hold next), keeps them: its Put stamps them stored
// now. Bytes stored before were left as they were, so the sweep deleted
// them under the hold about to be written. Unheld bytes nobody stored
// again go, with their sidecars, and orphaned sidecars go too.
func TestSweepSparesBytesStoredAgainSinceItsCutoff(t *testing.T) {
	s, err := NewStore(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	again, err := put(t, s, "stored again\n", "a.txt", "")
	if err != nil {
		t.Fatal(err)
	}
	gone, err := put(t, s, "gone\n", "g.txt", "")
	if err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(s.dir, "ab", strings.Repeat("c", 62)+".0123456789abcdef.facts")
	if err := os.MkdirAll(filepath.Dir(orphan), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(orphan, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-time.Hour)
	for _, p := range []string{s.blobPath(again.ID), s.blobPath(gone.ID), orphan} {
		if err := os.Chtimes(p, long, long); err != nil {
			t.Fatal(err)
		}
	}
	cutoff := time.Now().Add(-time.Minute)
	if _, err := put(t, s, "stored again\n", "b.txt", ""); err != nil {
		t.Fatal(err)
	}
	swept, err := s.Sweep(context.Background(), cutoff, func(string) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	if got := blobs(t, s); len(got) != 1 || filepath.Base(got[0]) != again.ID[2:] {
		t.Errorf("blobs after the sweep: %v; want only the one stored again", got)
	}
	if swept != (Swept{Files: 1, Bytes: gone.Size}) || s.Used() != again.Size {
		t.Errorf("swept %+v, %d used; want 1 file of %d bytes, %d used", swept, s.Used(), gone.Size, again.Size)
	}
	matches, _ := filepath.Glob(s.blobPath(gone.ID) + ".*")
	if _, err := os.Stat(orphan); !errors.Is(err, fs.ErrNotExist) || len(matches) != 0 {
		t.Errorf("sidecars left: %v, orphan: %v", matches, err)
	}
}
