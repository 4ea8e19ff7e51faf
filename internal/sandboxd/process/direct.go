package process

import (
	"os"
	"path/filepath"
	"strings"
)

// A command string is run by the shell (Shell -c), which for a simple command execs the
// program in its own place: the shell's only work is to be loaded and to split the words. Under
// gVisor that load is most of a small command's cost (an execve there is ~10 ms on systrap,
// docs/bench-runtimes.md), so a command the shell would run exactly as its words say is exec'd directly.
// Anything the shell would interpret (quotes, expansions, redirections, operators, globs,
// assignments, comments, builtins and keywords) still goes through the shell, and so does a
// program that cannot be found or run, so its errors stay the shell's.

// plainByte says which bytes a word may hold for the shell to take it literally: no quoting,
// expansion, globbing, redirection or operator character, no tilde, no comment.
func plainByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("-_./=:,+@%", c) >= 0
}

// shellWords are the builtins and reserved words of POSIX sh, dash and bash: a command that
// starts with one is the shell's own, even where a program of the name exists (echo's and
// printf's escapes, test's operators differ from coreutils').
var shellWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`. : [ [[ ]] ! { } alias bg bind break builtin caller cd command compgen
		complete continue declare dirs disown echo enable eval exec exit export false fc fg getopts hash
		help history jobs kill let local logout mapfile popd printf pushd pwd read readarray readonly
		return set shift shopt source suspend test times trap true type typeset ulimit umask unalias
		unset wait if then else elif fi case esac for while until do done function select time in
		coproc`) {
		shellWords[w] = true
	}
}

// directArgv is command split into its words when the shell would run it as exactly those
// words; false when the shell has anything to interpret, or the environment makes a
// non-interactive shell read a startup file first (ENV, BASH_ENV).
func directArgv(command string, env []string) ([]string, bool) {
	if envValue(env, "ENV") != "" || envValue(env, "BASH_ENV") != "" {
		return nil, false
	}
	for i := 0; i < len(command); i++ {
		if c := command[i]; c != ' ' && c != '\t' && !plainByte(c) {
			return nil, false
		}
	}
	words := strings.Fields(command)
	if len(words) == 0 || shellWords[words[0]] || strings.Contains(words[0], "=") {
		return nil, false
	}
	return words, true
}

// directCommand sets sp to exec command's words itself when the shell would run exactly them
// and the program is there to run; it reports whether it did.
func (sp *Spec) directCommand(command string) bool {
	words, ok := directArgv(command, sp.Env)
	if !ok {
		return false
	}
	path := sp.LookPath(words[0])
	if path == "" {
		return false
	}
	full := path
	if !filepath.IsAbs(full) {
		full = filepath.Join(sp.Dir, full)
	}
	if fi, err := os.Stat(full); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return false
	}
	sp.Argv, sp.Path = words, path
	return true
}
