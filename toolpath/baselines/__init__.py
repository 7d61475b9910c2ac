"""Rule-based deciders, each tied to one benchmark family: they answer through `Policy.respond` like a model,
so agents and benchmarks run them unchanged, but they read a typed observation (toolpath.observations) the
agent hands them instead of parsing prompt text.

    dom            MiniWoB++-style web tasks from the page's elements (computer_use agent, model `dom`); its
                   reading of the page and its action writer are dom_page.py
    ocr_grounder   GUI grounding by matching the instruction to on-screen text (model `ocr-grounder`)
    fsd_oracle     FSD answers from the robot simulator's ground truth (embodied agent, model `oracle`)
    fsd_detector   FSD answers from a colour/shape detector of the rendered scene (model `detector`)
    fsd_scene      what the two FSD deciders share: the scene model, the questions' answers in FSD's grammar
    masks          the binary-mask geometry they use (morphology, hull, bounding box)
"""
