// Package report is what the snapshot lab's workload answers to a probe: the state it holds in
// memory, in open files, in a child process and in TCP sockets, as JSON. The lab compares the
// answer before a checkpoint with the answer after a restore.
package report

// Report is one probe's answer.
type Report struct {
	PID          int    `json:"pid"`      // the workload's pid inside the sandbox
	ChildPID     int    `json:"childPid"` // a child it started
	ChildAlive   bool   `json:"childAlive"`
	Counter      int64  `json:"counter"` // incremented every 10 ms since start
	Token        string `json:"token"`   // held in memory only, set by the lab
	MemoryMiB    int    `json:"memoryMiB"`
	MemoryCRC    uint32 `json:"memoryCrc"`
	MemoryIntact bool   `json:"memoryIntact"` // the buffer's CRC equals the one taken at start
	RSSKiB       int64  `json:"rssKiB"`       // VmRSS as the sandbox's kernel counts it
	OpenFile     string `json:"openFile"`     // a write through the fd opened at start (rootfs), read back
	BindOpenFile string `json:"bindOpenFile"` // the same on the bind mount
	RootfsFile   string `json:"rootfsFile"`   // the token, written to the rootfs overlay
	BindFile     string `json:"bindFile"`     // the token, written to the bind mount
	HeldConn     string `json:"heldConn"`     // a round trip over the TCP connection dialled at start
	Hostname     string `json:"hostname"`
	Addrs        string `json:"addrs"` // the sandbox's interface addresses
}
