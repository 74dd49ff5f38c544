# completion.bash - bash completion for megacache: the commands, each command's options,
# file names where an option or operand takes a file (BUNDLE, -p, -s, -o, ...; a bundle
# may also be an oci:// reference, which is typed out), folders
# for the folder options, and the artifact types for --types.
# Installed as $(datadir)/bash-completion/completions/megacache; or: . completion.bash

_megacache_commands="keygen save run pack sign verify list load export merge diff copy push pull audit help"
# The built-in artifact types (megacache load --types bogus lists them).
_megacache_types="inductor aot_autograd autotune pgo precompile kernel_code gemm_timing triton extra triton_home
	vllm_meta vllm_handles vllm_artifact vllm_aot vllm_inductor vllm_extra"
_megacache_common="-q --quiet -v --verbose -h --help --progress --password-file --threads
	--max-manifest-bytes --max-artifacts --max-artifact-bytes --max-total-bytes --max-expansion
	--registry-ca --plain-http --registry-user --registry-password-file --timeout"
_megacache_trust="-p --threshold --min-version --require --now --insecure-no-verify"
_megacache_record="-s --label --label-from-env --labels-json --bundle-version --expires --level
	--no-compress --format-version --keep-unknown"

# The options of command $1, one word each.
_megacache_options()
{
	case $1 in
	keygen) echo "-p -s -W -f --force --json" ;;
	save) echo "-o --output --dry-run --cache-dir --triton-dir --vllm-dir --json $_megacache_record" ;;
	run) echo "-b --bundle -o --save-to --save-used --save-used-keep-unseen --allow-cold --types --sync --cache-dir --triton-dir --vllm-dir
		--gpu-target --skip-other-gpus --json --json-file $_megacache_trust $_megacache_record" ;;
	pack) echo "-o --output --from-torch --from-dir --from-triton-dir --from-vllm-dir --json $_megacache_record" ;;
	sign) echo "-s -o --output --json $_megacache_trust" ;;
	verify) echo "--json $_megacache_trust" ;;
	list) echo "-p --json --explain --cache-dir --triton-dir --vllm-dir --gpu-target --skip-other-gpus" ;;
	load) echo "--types --dry-run --sync --owner --gpu-target --skip-other-gpus --cache-dir --triton-dir --vllm-dir
		--json $_megacache_trust" ;;
	export) echo "--torch --torch-format --json $_megacache_trust" ;;
	merge) echo "-o --output -s --unsigned --label --bundle-version --level --expires --json $_megacache_trust" ;;
	diff) echo "--json" ;;
	copy) echo "--json" ;;
	push) echo "--redis --redis-password-file --triton --triton-key-format --types --ttl --dry-run
		--json $_megacache_trust" ;;
	pull) echo "-o --output --redis --redis-password-file --triton --triton-key-format --match
		--json $_megacache_record" ;;
	audit) echo "--redis --redis-password-file --triton --triton-key-format --json
		-p --threshold --min-version --require --now" ;;
	esac
	echo "$_megacache_common"
}

_megacache()
{
	local cur prev cmd i
	COMPREPLY=()
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD - 1]}
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W "$_megacache_commands --help --version" -- "$cur"))
		return
	fi
	cmd=${COMP_WORDS[1]}
	case $cmd in -V|--version) COMPREPLY=($(compgen -W "--json" -- "$cur")); return ;; esac
	# After run's --, the command run: leave it to bash.
	for ((i = 2; i < COMP_CWORD; i++)); do
		[ "${COMP_WORDS[i]}" = "--" ] && { COMPREPLY=($(compgen -c -- "$cur")); return; }
	done
	case $prev in
	--types)
		# A comma list: complete the type after the last comma.
		local done_part=
		case $cur in *,*) done_part=${cur%,*},; cur=${cur##*,} ;; esac
		COMPREPLY=($(compgen -P "$done_part" -W "$_megacache_types" -- "$cur"))
		return ;;
	--progress) COMPREPLY=($(compgen -W "tty plain none" -- "$cur")); return ;;
	--torch-format) COMPREPLY=($(compgen -W "2.7 current" -- "$cur")); return ;;
	--cache-dir|--triton-dir|--vllm-dir|--from-dir|--from-triton-dir|--from-vllm-dir)
		COMPREPLY=($(compgen -d -- "$cur")); return ;;
	-p|-s|-o|-b|--output|--bundle|--save-to|--save-used|--torch|--from-torch|--labels-json|--password-file|\
	--json-file|--redis-password-file|--registry-ca|--registry-password-file)
		COMPREPLY=($(compgen -f -- "$cur")); return ;;
	--label-from-env) COMPREPLY=($(compgen -v -- "$cur")); return ;;
	--threshold|--min-version|--require|--now|--expires|--level|--bundle-version|--owner|\
	--label|--threads|--max-*|--redis|--ttl|--match|--triton-key-format|--gpu-target|\
	--registry-user|--timeout)
		return ;;
	esac
	if [ "$cmd" = help ]; then
		COMPREPLY=($(compgen -W "$_megacache_commands" -- "$cur"))
	elif [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(_megacache_options "$cmd")" -- "$cur"))
	else
		COMPREPLY=($(compgen -f -- "$cur")) # BUNDLE operands
	fi
}
complete -o filenames -F _megacache megacache
