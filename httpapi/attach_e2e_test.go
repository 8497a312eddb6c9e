package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
	"github.com/agentd/agentd/testkit/pdfgen"
)

var noteID = regexp.MustCompile(`\[Attachment "([^"]+)".*?id=([0-9a-f]+)`)

// idsIn maps attachment names to ids from the notes in a request.
func idsIn(r testkit.Received) map[string]string {
	out := map[string]string{}
	for _, m := range r.Messages {
		for _, g := range noteID.FindAllStringSubmatch(m.Content, -1) {
			out[g[1]] = g[2]
		}
	}
	return out
}

func writeLines(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var n, i int64
	for n < size {
		i++
		k, _ := w.WriteString("line " + strconv.FormatInt(i, 10) + " lorem ipsum dolor\n")
		n += int64(k)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestBigAttachmentsAreReadOnDemandThroughTheTools(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 200 MB file")
	}
	dir := t.TempDir()
	txt, pdf := filepath.Join(dir, "big.txt"), filepath.Join(dir, "book.pdf")
	writeLines(t, txt, 200<<20)
	f, _ := os.Create(pdf)
	if err := pdfgen.Write(f, pdfgen.Spec{Pages: 3000, Group: 100}); err != nil {
		t.Fatal(err)
	}
	f.Close()

	var firstTokens int
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == chat.RoleUser {
			firstTokens = r.InputTokens
			ids := idsIn(r)
			return testkit.Reply{ToolCalls: []chat.ToolCall{
				{ID: "p", Name: "pdf_read", Arguments: fmt.Sprintf(`{"attachment_id":%q,"from_page":2500,"to_page":2500}`, ids["book.pdf"])},
				{ID: "l", Name: "file_read", Arguments: fmt.Sprintf(`{"attachment_id":%q,"from_line":1000000,"to_line":1000000}`, ids["big.txt"])},
			}}
		}
		var got []string
		for _, m := range r.Messages {
			if m.Role == chat.RoleTool {
				got = append(got, m.Content)
			}
		}
		return testkit.Reply{Text: strings.Join(got, "\n---\n")}
	}})
	defer fake.Close()
	cfg := daemontest.Config(filepath.Join(dir, "data"), fake.URL(), 32000)
	cfg.Attachments = configs.Attachments{AllowedDirs: []string{dir}}
	d := daemontest.Start(t, cfg, nil)
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "What do page 2,500 and line 1,000,000 say?", Paths: []string{txt, pdf}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	answer := res.Messages[len(res.Messages)-1].Content
	if !strings.Contains(answer, pdfgen.PageLine(2500)) || !strings.Contains(answer, "line 1000000 lorem ipsum") {
		t.Fatalf("the answers do not carry the right text: %.400s", answer)
	}
	// The system prompt and tools are the same in every request; what the
	// notes add to the first request is its count less that of a request
	// without attachments.
	res2, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "and without files?"}, nil)
	if err != nil || res2.Problem != nil {
		t.Fatal(err, res2.Problem)
	}
	reqs := fake.Requests()
	plain := reqs[len(reqs)-1].InputTokens - estimateOf(reqs[len(reqs)-1], 0)
	if notes := firstTokens - plain; notes > 2000 {
		t.Fatalf("the first request carries %d tokens of notes, over 2K", notes)
	}
}

// estimateOf counts what a request's messages after index i add.
func estimateOf(r testkit.Received, i int) int {
	n := 0
	for _, m := range r.Messages[i:] {
		n += testkit.CountTokens(m.Content)
		for _, c := range m.ToolCalls {
			n += testkit.CountTokens(c.Arguments)
		}
	}
	return n
}

func pngBytes(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 64, 48))
	img.Set(3, 3, color.RGBA{255, 0, 0, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func upload(t *testing.T, url, name string, data []byte) chat.Attachment {
	return uploadAs(t, url, "", name, data)
}

// uploadAs uploads with a tenant's token ("" for none).
func uploadAs(t *testing.T, url, token, name string, data []byte) chat.Attachment {
	t.Helper()
	a, refused := tryUpload(t, url, token, name, data)
	if refused != nil {
		t.Fatalf("upload: %d %s", refused.Status, refused.Message)
	}
	return a
}

// tryUpload uploads one file as token's tenant: the attachment, or the
// error answer (a status other than 201).
func tryUpload(t *testing.T, url, token, name string, data []byte) (chat.Attachment, *api.Error) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", name)
	fw.Write(data)
	mw.Close()
	req, _ := http.NewRequest("POST", url+"/v1/attachments", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		refused := &api.Error{Status: resp.StatusCode}
		if err := json.NewDecoder(resp.Body).Decode(refused); err != nil {
			t.Fatalf("upload: status %d with a body that is not the error shape: %v", resp.StatusCode, err)
		}
		return chat.Attachment{}, refused
	}
	var out struct{ Attachments []chat.Attachment }
	if json.NewDecoder(resp.Body).Decode(&out) != nil || len(out.Attachments) != 1 {
		t.Fatalf("upload: status %d without one attachment", resp.StatusCode)
	}
	return out.Attachments[0], nil
}

func TestPicturesReachOnlyAModelThatSees(t *testing.T) {
	for _, vision := range []bool{false, true} {
		t.Run(fmt.Sprintf("vision=%v", vision), func(t *testing.T) {
			var offered [][]string
			var pixels int
			fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
				offered = append(offered, r.Tools)
				for _, m := range r.Messages {
					pixels += len(m.Images)
				}
				last := r.Messages[len(r.Messages)-1]
				if last.Role == chat.RoleUser && slices.Contains(r.Tools, "image_view") {
					return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "v", Name: "image_view", Arguments: fmt.Sprintf(`{"attachment_id":%q}`, idsIn(r)["dot.png"])}}}
				}
				return testkit.Reply{Text: "ok"}
			}})
			defer fake.Close()
			cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
			cfg.Providers[0].Models[0].Vision = vision
			d := daemontest.Start(t, cfg, nil)
			a := upload(t, d.Server.URL, "dot.png", pngBytes(t))
			if !strings.Contains(a.Note, "64x48 px") {
				t.Fatalf("note = %q", a.Note)
			}
			ctx := context.Background()
			c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
			if _, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "look", AttachmentIDs: []string{a.ID}}, nil); err != nil {
				t.Fatal(err)
			}
			if slices.Contains(offered[0], "image_view") != vision {
				t.Fatalf("image_view offered = %v to a model with vision %v", !vision, vision)
			}
			if (pixels > 0) != vision {
				t.Fatalf("pixels sent: %d, vision %v", pixels, vision)
			}
		})
	}
}
