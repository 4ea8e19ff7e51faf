package sandboxdtest

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/textproto"
	"testing"
)

// MultipartBody is a multipart/form-data body with one part, field, whose
// filename is written between quotes as is; it returns the body and its
// Content-Type.
func MultipartBody(t testing.TB, field, filename, content string) (*bytes.Buffer, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="`+field+`"; filename="`+filename+`"`)
	h.Set("Content-Type", "application/octet-stream")
	pw, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(pw, content)
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf, mw.FormDataContentType()
}
