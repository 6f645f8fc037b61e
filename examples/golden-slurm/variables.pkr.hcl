variable "region" {
  type        = string
  description = "Region the build instance runs in and the DLAMI is resolved in."
  default     = "us-east-1"
}

variable "instance_type" {
  type        = string
  description = "Build instance type; validation expectations (GPUs, EFA, busbw floor) follow its profile."
  default     = "p6-b200.48xlarge"
  validation {
    condition     = contains(["p6-b200.48xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge"], var.instance_type)
    error_message = "The instance_type must be one of p6-b200.48xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge."
  }
}

variable "subnet_id" {
  type        = string
  description = "Subnet (in an AZ with capacity for instance_type) for the build instance; null lets AWS choose."
  default     = null
}

variable "ami_regions" {
  type        = list(string)
  description = "Regions the finished AMI is copied to."
  default     = ["us-west-2"]
}

variable "root_volume_gb" {
  type    = number
  default = 200
}

variable "report_dir" {
  type        = string
  description = "Where dlami-report.{json,junit.xml,md} are written."
  default     = "dlami-reports/golden-slurm"
}

variable "kms_key_id" {
  type        = string
  description = "KMS key (ID, ARN or alias/NAME) the AMI's snapshots are encrypted with in region; \"\" is the region's AWS managed key, aws/ebs."
  default     = ""
}

variable "region_kms_key_ids" {
  type        = map(string)
  description = "Per ami_regions copy, the KMS key of that region (\"\" for its aws/ebs); empty: every copy uses its region's aws/ebs. When set, it must name every region of ami_regions."
  default     = {}
}

variable "deprecate_after" {
  type        = string
  description = "How long after the bake EC2 marks the AMI deprecated (a Go duration in hours, e.g. 4380h, about six months); rebake before."
  default     = "4380h"
}

variable "slurm_major" {
  type        = string
  description = "The Slurm major release slurmd must be (Ubuntu 24.04's archive: 23.11). slurmd must be no newer than the cluster's slurmctld and at most two major releases older (three from slurmctld 24.11): https://slurm.schedmd.com/upgrades.html."
  default     = "23.11"
  validation {
    condition     = can(regex("^[0-9]{2}\\.[0-9]{2}$", var.slurm_major))
    error_message = "The slurm_major must be a Slurm major release such as 23.11."
  }
}

variable "enroot_version" {
  type    = string
  default = "3.5.0"
}

# No defaults for the checksums: take them from the release assets you reviewed
# (sha256sum of each download, or the SHA-256 GitHub shows beside each release asset), for the
# build instance's architecture (amd64 on p5/p6), and keep them in a .pkrvars.hcl file next to
# the versions they belong to. The layer fails the bake on any mismatch.
variable "enroot_deb_sha256" {
  type        = string
  description = "SHA-256 of enroot_<enroot_version>-1_<arch>.deb from https://github.com/NVIDIA/enroot/releases."
  validation {
    condition     = can(regex("^[0-9a-f]{64}$", var.enroot_deb_sha256))
    error_message = "The enroot_deb_sha256 must be 64 lower-case hex digits (sha256sum of the .deb)."
  }
}

variable "enroot_caps_deb_sha256" {
  type        = string
  description = "SHA-256 of enroot+caps_<enroot_version>-1_<arch>.deb from https://github.com/NVIDIA/enroot/releases."
  validation {
    condition     = can(regex("^[0-9a-f]{64}$", var.enroot_caps_deb_sha256))
    error_message = "The enroot_caps_deb_sha256 must be 64 lower-case hex digits (sha256sum of the .deb)."
  }
}

variable "pyxis_version" {
  type    = string
  default = "0.20.0"
}

variable "pyxis_tarball_sha256" {
  type        = string
  description = "SHA-256 of https://github.com/NVIDIA/pyxis/archive/refs/tags/v<pyxis_version>.tar.gz."
  validation {
    condition     = can(regex("^[0-9a-f]{64}$", var.pyxis_tarball_sha256))
    error_message = "The pyxis_tarball_sha256 must be 64 lower-case hex digits (sha256sum of the tarball)."
  }
}

variable "dlami_build" {
  type        = string
  description = "DLAMI build (YYYYMMDD, the date at the end of its name) to bake on: the build whose kernel and driver expect_kernel and expect_nvidia_driver name. Move the three together, after reviewing the DLAMI release notes."
  default     = "20261002"
}

variable "expect_kernel" {
  type        = string
  description = "Kernel of the DLAMI build you validated (uname -r)."
  default     = "7.0.0-1014-aws"
}

variable "expect_nvidia_driver" {
  type        = string
  description = "NVIDIA driver of the DLAMI build you validated."
  default     = "595.91.07"
}
