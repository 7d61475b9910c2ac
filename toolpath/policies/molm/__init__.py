"""The tiny graph-LM's model parts (a molecule as graph tensors, the message-passing encoder and its next-atom
head, the entropy patcher, the query connectors, the folder), on the policies floor so that the policy that
answers with it and the build that trains it (toolpath/train/tiny_molm.py) share one definition."""
