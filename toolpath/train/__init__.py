"""Training small models here, on CPU, from data the package can make or install: the tiny VLM
(`toolpath models build tiny-vlm`). Sits on the evals floor because its scenes are the eval suite's scenes."""
