package antispoof

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
)

// PluginType is the plugin's name in a conflist and in the CNI bin dir.
const PluginType = "agent-sandbox-antispoof"

// Versions are the CNI spec versions the plugin speaks; CHECK exists from 0.4.0. Not 1.1.0:
// its GC and STATUS are not implemented (a pod's chain goes with its DEL, the rest with `down`).
var Versions = version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0")

// Conf is the plugin's entry in the conflist.
type Conf struct {
	types.PluginConf
	// Nft is the nft binary (default: nft on PATH, else /usr/sbin/nft).
	Nft string `json:"nft,omitempty"`
}

// Funcs are the plugin's commands for skel.PluginMainFuncs.
func Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck}
}

func parseConf(data []byte) (*Conf, error) {
	conf := &Conf{}
	if err := json.Unmarshal(data, conf); err != nil {
		return nil, fmt.Errorf("reading the network configuration: %w", err)
	}
	if err := version.ParsePrevResult(&conf.PluginConf); err != nil {
		return nil, err
	}
	return conf, nil
}

// portOf reads the pod's port from the previous plugin's result.
func portOf(conf *Conf, ifName string) (Port, error) {
	if conf.PrevResult == nil {
		return Port{}, errors.New("no prevResult: chain " + PluginType + " after the bridge plugin")
	}
	res, err := current.NewResultFromResult(conf.PrevResult)
	if err != nil {
		return Port{}, fmt.Errorf("converting prevResult: %w", err)
	}
	return PortFromResult(res, ifName)
}

// cmdAdd installs the port's rules and passes the previous result on unchanged.
func cmdAdd(args *skel.CmdArgs) error {
	conf, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	p, err := portOf(conf, args.IfName)
	if err != nil {
		return err
	}
	if err := install(execNft(conf.Nft), ChainName(args.ContainerID, args.IfName), p); err != nil {
		return fmt.Errorf("installing anti-spoofing rules for %s: %w", p.Veth, err)
	}
	return types.PrintResult(conf.PrevResult, conf.CNIVersion)
}

// cmdDel removes the attachment's rules, found by container ID and interface alone, so that a
// DEL without prevResult, or a repeated one, still succeeds.
func cmdDel(args *skel.CmdArgs) error {
	conf, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	return remove(execNft(conf.Nft), ChainName(args.ContainerID, args.IfName))
}

// cmdCheck fails unless the port's rules are in place as ADD left them.
func cmdCheck(args *skel.CmdArgs) error {
	conf, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	p, err := portOf(conf, args.IfName)
	if err != nil {
		return err
	}
	return verify(execNft(conf.Nft), ChainName(args.ContainerID, args.IfName), p)
}
