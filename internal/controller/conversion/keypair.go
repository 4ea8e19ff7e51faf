package conversion

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// keyPair serves the certificate in certFile and keyFile and reloads it when either file
// changes (a Secret volume swaps them on rotation). It looks at the files during a handshake, at
// most once per interval: no goroutine and no file watch, so nothing outlives the server.
// (controller-runtime's certwatcher leaves its fsnotify goroutine running when its context ends
// before its watches are added, which a server stopped right after it started does.)
type keyPair struct {
	certFile, keyFile string
	interval          time.Duration

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string // the files' sizes and modification times when cert was read
	checked time.Time
}

func loadKeyPair(certFile, keyFile string) (*keyPair, error) {
	kp := &keyPair{certFile: certFile, keyFile: keyFile, interval: time.Second}
	if !kp.reload() {
		return nil, fmt.Errorf("no usable key pair in %s and %s", certFile, keyFile)
	}
	return kp, nil
}

// reload reads the pair when the files changed; a pair that does not load (half written) keeps
// the one before. It reports whether a certificate is held.
func (kp *keyPair) reload() bool {
	st, err := fileStamp(kp.certFile, kp.keyFile)
	if err == nil && st != kp.stamp {
		if c, err := tls.LoadX509KeyPair(kp.certFile, kp.keyFile); err == nil {
			kp.cert, kp.stamp = &c, st
		}
	}
	return kp.cert != nil
}

// GetCertificate is the tls.Config hook.
func (kp *keyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if now := time.Now(); now.Sub(kp.checked) >= kp.interval {
		kp.checked = now
		kp.reload()
	}
	return kp.cert, nil
}

func fileStamp(paths ...string) (string, error) {
	s := ""
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		s += fmt.Sprintf("%d@%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return s, nil
}
