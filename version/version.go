// Package version holds the plugin's version, reported by `describe`.
package version

import "github.com/hashicorp/packer-plugin-sdk/version"

var (
	// Version is the main version number. Release builds set it with -ldflags.
	Version = "0.1.0"
	// VersionPrerelease is "dev" for local builds and empty for releases.
	VersionPrerelease = "dev"
	// VersionMetadata is optional build metadata.
	VersionMetadata = ""
	// PluginVersion is what the plugin set reports to Packer.
	PluginVersion = version.NewPluginVersion(Version, VersionPrerelease, VersionMetadata)
)
