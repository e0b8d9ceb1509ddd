# café in Latin-1
import torch
