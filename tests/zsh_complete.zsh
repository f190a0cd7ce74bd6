# Prints the candidates zsh's completion system offers for each command line, one line each:
#   zsh -f zsh_complete.zsh FPATH_DIR WORKDIR 'hostwire gaps runs/' 'hostwire re' ...
# An interactive zsh in a pseudo-terminal (zpty) with compinit and the completion function from
# FPATH_DIR; TAB runs the completer, and every compadd call's matches are collected.
zmodload zsh/zpty
zpty z zsh -f -i
# the completion system of zsh itself (Base, Unix, Zsh) and hostwire's: compinit reads a tenth of the files
zpty -w z "PS1=''; fpath=($1 \${(M)fpath:#*/Completion(|/Base|/Unix|/Zsh)}); autoload -U compinit; compinit -u -D; cd ${(q)2}"
zpty -w z '_hw_collect() { __hits=(); compadd() { local -a o; builtin compadd -O o "$@"; __hits+=($o); builtin compadd "$@"; }; _main_complete; unfunction compadd; print -r -- "HITS: ${(j: :)__hits} END" > /dev/tty; }'
zpty -w z 'zle -C complete-word .complete-word _hw_collect; bindkey "^I" complete-word'
zpty -w z 'echo READY'
zpty -r z line '*READY*'
zpty -r z line '*READY*'
for command_line in "${@[3,-1]}"; do
    zpty -w -n z "$command_line"$'\t'
    zpty -r z out '*END*'
    out=${out##*HITS: }
    print -r -- "${out% END*}"
    zpty -w -n z $'\x15'  # ^U: the next line starts on an empty one
done
zpty -d z
