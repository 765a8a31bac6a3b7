" .ipu scripts: plans for training models on Graphcore IPU pods.
autocmd BufRead,BufNewFile *.ipu setfiletype ipu
