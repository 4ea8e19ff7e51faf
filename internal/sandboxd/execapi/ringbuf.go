package execapi

// ringBuffer keeps the last len(buf) bytes written to it, and counts every
// byte ever written so readers can follow it by offset.
type ringBuffer struct {
	buf   []byte
	total int64 // bytes ever written; the newest byte is at (total-1) % len(buf)
}

func newRingBuffer(size int) *ringBuffer { return &ringBuffer{buf: make([]byte, size)} }

func (r *ringBuffer) Write(p []byte) {
	n := len(r.buf)
	if len(p) > n { // only the tail survives
		r.total += int64(len(p) - n)
		p = p[len(p)-n:]
	}
	for len(p) > 0 {
		at := int(r.total % int64(n))
		c := copy(r.buf[at:], p)
		p = p[c:]
		r.total += int64(c)
	}
}

// readFrom returns a copy of the bytes from offset off to the end, the new
// offset, and whether bytes before the returned ones were lost (off was
// older than what the buffer holds).
func (r *ringBuffer) readFrom(off int64) (data []byte, next int64, lost bool) {
	oldest := max(r.total-int64(len(r.buf)), 0)
	if off < oldest {
		off, lost = oldest, true
	}
	if off >= r.total {
		return nil, r.total, lost
	}
	out := make([]byte, 0, r.total-off)
	n := int64(len(r.buf))
	for off < r.total {
		at := off % n
		end := min(n, at+(r.total-off))
		out = append(out, r.buf[at:end]...)
		off += end - at
	}
	return out, r.total, lost
}
