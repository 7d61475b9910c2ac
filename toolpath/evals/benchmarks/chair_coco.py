"""CHAIR on COCO: the paper's 80 categories with their synonyms, and the objects of COCO images from annotations.

SYNONYMS is the CHAIR release's data/synonyms.txt (Rohrbach, Hendricks et al. 2018, BSD 2-Clause), as published
(its repeated entries and misspellings "televison", "phon", "knive", "solider" included: they are what CHAIR
matches): one category a line, the COCO category name first, then the words that name it. The phrase rules
(PHRASES) are the ones CHAIR's chair.py hard-codes: two-word names read as one ("motor bike"), "baby"/"adult"
before an animal and "passenger" before a jet or train not read as a person, "bow tie" a tie, "toilet seat" a
toilet, and "seat" not a chair in a caption that mentions a toilet ("home plate", "train track": not objects).

An image's objects, as CHAIR takes them: the categories of its instance annotations, plus the objects its
reference captions mention when a captions file is given (CHAIR uses both).
"""

from __future__ import annotations

import os
from pathlib import Path

from . import BenchmarkDataError, Record, read_json
from .chair_metrics import Vocabulary

SYNONYMS = """\
person, girl, boy, man, woman, kid, child, chef, baker, people, adult, rider, children, baby, worker, passenger, sister, biker, policeman, cop, officer, lady, cowboy, bride, groom, male, female, guy, traveler, mother, father, gentleman, pitcher, player, skier, snowboarder, skater, skateboarder, person, woman, guy, foreigner, child, gentleman, caller, offender, coworker, trespasser, patient, politician, soldier, grandchild, serviceman, walker, drinker, doctor, bicyclist, thief, buyer, teenager, student, camper, driver, solider, hunter, shopper, villager
bicycle, bike, bicycle, bike, unicycle, minibike, trike
car, automobile, van, minivan, sedan, suv, hatchback, cab, jeep, coupe, taxicab, limo, taxi
motorcycle, scooter,  motor bike, motor cycle, motorbike, scooter, moped
airplane, jetliner, plane, air plane, monoplane, aircraft, jet, jetliner, airbus, biplane, seaplane
bus, minibus, trolley
train, locomotive, tramway, caboose
truck, pickup, lorry, hauler, firetruck
boat, ship, liner, sailboat, motorboat, dinghy, powerboat, speedboat, canoe, skiff, yacht, kayak, catamaran, pontoon, houseboat, vessel, rowboat, trawler, ferryboat, watercraft, tugboat, schooner, barge, ferry, sailboard, paddleboat, lifeboat, freighter, steamboat, riverboat, battleship, steamship
traffic light, street light, traffic signal, stop light, streetlight, stoplight
fire hydrant, hydrant
stop sign
parking meter
bench, pew
bird, ostrich, owl, seagull, goose, duck, parakeet, falcon, robin, pelican, waterfowl, heron, hummingbird, mallard, finch, pigeon, sparrow, seabird, osprey, blackbird, fowl, shorebird, woodpecker, egret, chickadee, quail, bluebird, kingfisher, buzzard, willet, gull, swan, bluejay, flamingo, cormorant, parrot, loon, gosling, waterbird, pheasant, rooster, sandpiper, crow, raven, turkey, oriole, cowbird, warbler, magpie, peacock, cockatiel, lorikeet, puffin, vulture, condor, macaw, peafowl, cockatoo, songbird
cat, kitten, feline, tabby
dog, puppy, beagle, pup, chihuahua, schnauzer, dachshund, rottweiler, canine, pitbull, collie, pug, terrier, poodle, labrador, doggie, doberman, mutt, doggy, spaniel, bulldog, sheepdog, weimaraner, corgi, cocker, greyhound, retriever, brindle, hound, whippet, husky
horse, colt, pony, racehorse, stallion, equine, mare, foal, palomino, mustang, clydesdale, bronc, bronco
sheep, lamb, ram, lamb, goat, ewe
cow, cattle, oxen, ox, calf, cattle, holstein, heifer, buffalo, bull, zebu, bison
elephant
bear, panda
zebra
giraffe
backpack, knapsack
umbrella
handbag, wallet, purse, briefcase
tie, bow, bow tie
suitcase, suit case, luggage
frisbee
skis, ski
snowboard
sports ball, ball
kite
baseball bat
baseball glove
skateboard
surfboard, longboard, skimboard, shortboard, wakeboard
tennis racket, racket
bottle
wine glass
cup
fork
knife, pocketknife, knive
spoon
bowl, container
banana
apple
sandwich, burger, sub, cheeseburger, hamburger
orange
broccoli
carrot
hot dog
pizza
donut, doughnut, bagel
cake,  cheesecake, cupcake, shortcake, coffeecake, pancake
chair, seat, stool
couch, sofa, recliner, futon, loveseat, settee, chesterfield
potted plant, houseplant
bed
dining table, table, desk
toilet, urinal, commode, toilet, lavatory, potty
tv, monitor, televison, television
laptop, computer, notebook, netbook, lenovo, macbook, laptop computer
mouse
remote
keyboard
cell phone, mobile phone, phone, cellphone, telephone, phon, smartphone, iPhone
microwave
oven, stovetop, stove, stove top oven
toaster
sink
refrigerator, fridge, fridge, freezer
book
clock
vase
scissors
teddy bear, teddybear
hair drier, hairdryer
toothbrush
"""  # noqa: E501 -- data: synonyms.txt as published, one category a line


IMAGES_ENV = "TOOLPATH_CHAIR_IMAGES"
_ANIMALS = ("bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "animal", "cub")
PHRASES: dict[str, str | None] = {
    **{f"{q} {a}": (a if a not in ("animal", "cub") else None) for q in ("baby", "adult") for a in _ANIMALS},
    **{f"passenger {v}": v for v in ("jet", "train")},
    "bow tie": "tie", "toilet seat": "toilet", "home plate": None, "train track": None,
}


def synonym_lines() -> list[list[str]]:
    return [[w.strip() for w in line.split(",") if w.strip()] for line in SYNONYMS.splitlines() if line.strip()]


def _class_of_animal(phrase_class: str | None, lines: list[list[str]]) -> str | None:
    """An animal word's class (a "baby cow" is a cow; "baby bird" a bird)."""
    if phrase_class is None:
        return None
    return next((line[0] for line in lines if phrase_class in line), phrase_class)


def vocabulary() -> Vocabulary:
    lines = synonym_lines()
    return Vocabulary.from_lines(lines, {k: _class_of_animal(v, lines) for k, v in PHRASES.items()})


COCO = vocabulary()


def coco_mentions(caption: str) -> list[str]:
    """The COCO classes a caption mentions, one per mention; "seat" is not a chair where a toilet is mentioned."""
    found = COCO.mentions(caption)
    if any(cls == "toilet" for _, _, cls in found):
        found = [m for m in found if m[1] != "seat"]
    return [cls for _, _, cls in found]


def coco_records(instances: Path) -> list[Record]:
    """One record per annotated image of a COCO instances file: its objects (categories, plus the classes its
    reference captions mention when captions_<split>.json sits beside instances_<split>.json), its image file
    under $TOOLPATH_CHAIR_IMAGES or the file's folder."""
    data = read_json(instances, "COCO instance annotations")
    if not isinstance(data, dict) or not all(isinstance(data.get(k), list) for k in ("images", "annotations",
                                                                                     "categories")):
        raise BenchmarkDataError(f"{instances}: expected COCO instance annotations (an object with images, "
                                 "annotations and categories lists)")
    lines = synonym_lines()
    to_class = {name: line[0] for line in lines for name in line}
    try:
        names = {c["id"]: c["name"] for c in data["categories"]}
        files = {im["id"]: im["file_name"] for im in data["images"]}
        objects: dict[int, set[str]] = {}
        for n, a in enumerate(data["annotations"]):
            name = names[a["category_id"]]
            if name not in to_class:
                raise BenchmarkDataError(f"{instances}: annotations[{n}]: category {name!r} is not one of CHAIR's "
                                         "80 COCO categories")
            objects.setdefault(a["image_id"], set()).add(to_class[name])
    except (KeyError, TypeError) as err:
        raise BenchmarkDataError(f"{instances}: malformed COCO annotations: missing or bad {err}") from None
    captions = instances.with_name(instances.name.replace("instances_", "captions_", 1))
    if captions != instances and captions.is_file():
        for _n, a in enumerate(read_json(captions, "COCO captions").get("annotations", [])):
            if a.get("image_id") in objects and isinstance(a.get("caption"), str):
                objects[a["image_id"]].update(coco_mentions(a["caption"]))
    env = os.environ.get(IMAGES_ENV, "").strip()
    root = Path(env).expanduser() if env else instances.parent
    out = []
    for image_id in sorted(objects):
        if image_id not in files:
            raise BenchmarkDataError(f"{instances}: annotations name image_id {image_id}, which images does not list")
        path = root / files[image_id]
        if not path.is_file():
            raise BenchmarkDataError(f"{instances}: image {image_id} not found: {path} (put the images in the "
                                     f"file's folder or set {IMAGES_ENV} to their folder)")
        out.append(Record(f"coco-{image_id}", "coco", {"image": str(path.resolve()), "image_id": image_id,
                                                       "objects": sorted(objects[image_id]), "source": "coco"}))
    if not out:
        raise BenchmarkDataError(f"{instances}: no annotated images")
    return out
