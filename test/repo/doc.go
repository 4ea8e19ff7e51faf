// Package repo holds tests of the repository itself rather than of one package: that
// CONTRIBUTING.md's package map names every Go package and nothing else, and that the scripts
// under hack/ a newcomer's first run depends on behave.
package repo
