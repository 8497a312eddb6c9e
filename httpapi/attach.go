package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
)

// upload stores the files of a multipart body (field "file", one or more),
// streaming each straight to the attachment store.
func (s *Server) upload(w http.ResponseWriter, r *http.Request, tenant string) {
	limitBody(w, r, s.cfg.HTTP.UploadTimeout.Duration)
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.Limits.MaxUploadBytes)
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "send the files as multipart/form-data in a field named \"file\": "+err.Error())
		return
	}
	var out []chat.Attachment
	for {
		part, err := mr.NextPart()
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("upload over the limit of %d bytes", tooBig.Limit))
				return
			}
			if bodyTimedOut(err) {
				w.Header().Set("Connection", "close")
				writeError(w, http.StatusRequestTimeout, "timeout", "the upload did not arrive within http.upload_timeout")
				return
			}
			if err.Error() != "EOF" {
				writeError(w, http.StatusBadRequest, "bad_request", "multipart body: "+err.Error())
				return
			}
			break
		}
		if part.FormName() != "file" {
			continue
		}
		a, err := s.hub.Attach(r.Context(), tenant, part, part.FileName(), part.Header.Get("Content-Type"))
		if err != nil {
			writeHubError(w, err)
			return
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		writeError(w, http.StatusBadRequest, "bad_request", "no file part named \"file\" in the body")
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"attachments": out})
}

// attach resolves a message's attachments into reference notes: uploaded
// ids the tenant owns, and paths under the allowed directories.
func (s *Server) attach(ctx context.Context, tenant string, msg *chat.Message, req api.SendMessageRequest) error {
	for _, id := range req.AttachmentIDs {
		a, err := s.hub.Attachment(ctx, tenant, id)
		if err != nil {
			return err
		}
		msg.Attachments = append(msg.Attachments, a)
	}
	for _, p := range req.Paths {
		a, err := s.hub.AttachPath(ctx, tenant, p)
		if err != nil {
			return err
		}
		msg.Attachments = append(msg.Attachments, a)
	}
	return nil
}
