"""``koord completion bash|zsh``: print a shell completion script for ``koord``.

    eval "$(koord completion bash)"      # in ~/.bashrc
    eval "$(koord completion zsh)"       # in ~/.zshrc (uses zsh's bash-completion layer)

The script is generated from the parser itself (every installed command, subcommand and option, plugin
names for the commands that take one), so it is static and costs nothing at each <TAB>: regenerate it after
installing or removing a distribution that adds commands or plugins.
"""

from __future__ import annotations

import argparse
import shlex

__all__ = ["register", "script"]

SHELLS = ("bash", "zsh")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "completion",
        help="print a bash or zsh completion script",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("shell", choices=SHELLS)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from koord_framework.cli.main import build_parser

    print(script(build_parser(full=True), args.shell), end="")
    return 0


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...], out: dict[str, list[str]]) -> None:
    """``out["koord simulate"]`` = the words that may follow ``koord simulate``: options and subcommands."""
    words: list[str] = []
    for action in parser._actions:
        words.extend(o for o in action.option_strings if o.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                words.append(name)
                _walk(sub, (*path, name), out)
        elif not action.option_strings and action.choices:
            words.extend(str(c) for c in action.choices)
    out[" ".join(path)] = sorted(set(words))


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    table: dict[str, list[str]] = {}
    _walk(parser, ("koord",), table)
    cases = "\n".join(
        f"        {shlex.quote(key)}) words={shlex.quote(' '.join(words))} ;;" for key, words in table.items()
    )
    body = f"""_koord() {{
    local cur key words i w
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    key="koord"
    # The longest known command path among the words before the cursor (options are skipped).
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${{COMP_WORDS[i]}}"
        case "$w" in -*) continue ;; esac
        case "$key $w" in
{chr(10).join(f"            {shlex.quote(k)}) key={shlex.quote(k)} ;;" for k in table if k != "koord")}
        esac
    done
    case "$key" in
{cases}
        *) words="" ;;
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
    # Nothing known fits: a path (manifests, profiles).
    [ ${{#COMPREPLY[@]}} -eq 0 ] && COMPREPLY=($(compgen -f -- "$cur"))
    return 0
}}
complete -o filenames -F _koord koord
"""
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + body
    return body
